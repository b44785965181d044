"""Seeded simulations of the suite comparisons (`stream_app.metrics.suite_comparison`, the code
the worker and `replay` call): suites of tasks of very different difficulty, runs arriving in a
harness's order. Coverage is of the true figures at every look at once (every 5 runs up to
1,000, then every 2 % more, and the last); power is the share of suites whose T1 - T0 interval
excludes 0 at the end.

    .venv/bin/python -m bench.suite_comparison [--quick] [--jobs 2] [--section power ...]

The true difference is the equal-weight mean, over the tasks paired so far, of each task's
T1 rate minus its T0 rate, each the mean true rate of its runs so far (a task whose subtests
differ has the mix of subtests it ran); the true pass rate likewise over the tasks T1 ran. Beside our
power is the oracle's: a fixed-sample z-test at the end on the same figure, with the runs'
true variance, read once (valid only if nobody looked before), and its half-width beside ours;
then the half-width of the run-level test alone (as if no experiment had closed: the method
before experiments were units). Widths are medians. Seeds are fixed.

Sections: `tuned` (what the bets' weights were set on), `heldout` (other shapes, not tuned on),
`narrowing` (25, 250 and 2,500 tasks with 3 to 40 runs a tier, in harness order), `power` (+10
points, 20 runs per task and tier)."""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Final

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stream_app.metrics.suite_comparison import (  # noqa: E402
    Paired,
    closings,
    paired_difference,
    suite_mean,
)
from stream_app.metrics.suite_outcomes import Outcomes  # noqa: E402

CONFIDENCE = 0.95
LOOK_EVERY = 5
Run = tuple[int, int, float]
"""(task, tier, its true rate): tier 0 is the baseline."""
Suite = Callable[[random.Random], list[Run]]


def clip(p: float) -> float:
    return min(0.99, max(0.01, p))


def by_task(tasks: list[tuple[list[float], list[float]]], rnd: random.Random) -> list[Run]:
    """Each task's runs (per tier, the rates of its runs in order), the tasks one after
    another, the two tiers' runs of a task interleaved at random."""
    out: list[Run] = []
    for task, (base, tier) in enumerate(tasks):
        marks = [0] * len(base) + [1] * len(tier)
        rnd.shuffle(marks)
        queues = [iter(base), iter(tier)]
        out += [(task, t, next(queues[t])) for t in marks]
    return out


def flat(count: int, runs: int, rate: Callable[[random.Random], float], effect: float) -> Suite:
    """`count` tasks of `runs` runs per tier, base rates drawn by `rate`, T1 = T0 + effect."""

    def make(rnd: random.Random) -> list[Run]:
        rates = [rate(rnd) for _ in range(count)]
        return by_task([([p] * runs, [clip(p + effect)] * runs) for p in rates], rnd)

    return make


def uniform(rnd: random.Random) -> float:
    return rnd.uniform(0.02, 0.98)


def clustered(rnd: random.Random) -> list[Run]:
    """Three clusters of difficulty (rates near 0.08, 0.5 and 0.92), T1 helping the easy ones
    and hurting the middle; 30 tasks of 20 runs per tier, task by task."""
    tasks = []
    for _ in range(30):
        centre, effect = rnd.choice(((0.08, 0.05), (0.5, -0.10), (0.92, 0.02)))
        p = clip(centre + rnd.uniform(-0.04, 0.04))
        tasks.append(([p] * 20, [clip(p + effect)] * 20))
    return by_task(tasks, rnd)


def speeds(rnd: random.Random) -> list[Run]:
    """T0 runs its tasks twice as fast as T1: T1 is paired on fewer tasks most of the time.
    30 tasks, 20 runs each, T1 = T0 + 0.05."""
    rates = [uniform(rnd) for _ in range(30)]
    base = [(e, 0, p) for e, p in enumerate(rates) for _ in range(20)]
    tier = [(e, 1, clip(p + 0.05)) for e, p in enumerate(rates) for _ in range(20)]
    out: list[Run] = []
    while base or tier:
        out += base[:2] + tier[:1]
        del base[:2], tier[:1]
    return out


def missing(rnd: random.Random) -> list[Run]:
    """T1 never runs a third of the tasks (they are not paired); T1 = T0; 45 tasks."""
    tasks = []
    for _ in range(45):
        p = uniform(rnd)
        tasks.append(([p] * 20, [p] * 20 if rnd.random() >= 1 / 3 else []))
    return by_task(tasks, rnd)


def harness(effect: float, count: int = 30) -> Suite:
    """Each task has 4 subtests of very different rates (the task's base -0.3, -0.1, +0.1,
    +0.3), run in blocks: subtest 00's 5 runs of T0, then of T1, then subtest 01's ...;
    T1 = T0 + effect on every subtest."""

    def make(rnd: random.Random) -> list[Run]:
        out: list[Run] = []
        for task in range(count):
            base = rnd.uniform(0.3, 0.7)
            for shift in (-0.3, -0.1, 0.1, 0.3):
                p = clip(base + shift)
                out += [(task, 0, p)] * 5 + [(task, 1, clip(p + effect))] * 5
        return out

    return make


def epochs(rnd: random.Random) -> list[Run]:
    """Rates near 0 or 1 (Beta(0.4, 0.4)), epoch by epoch: each epoch runs every task once per
    tier; T1 = T0 - 0.03; 30 tasks, 20 epochs."""
    rates = [clip(rnd.betavariate(0.4, 0.4)) for _ in range(30)]
    return [
        (e, t, clip(p - 0.03 * t)) for _ in range(20) for e, p in enumerate(rates) for t in (0, 1)
    ]


def uneven(rnd: random.Random) -> list[Run]:
    """60 tasks with 3 to 40 runs per tier (a different count per tier), tiers' runs
    interleaved at random across the whole suite; T1 = T0 + 0.03."""
    runs: list[Run] = []
    for task in range(60):
        p = uniform(rnd)
        runs += [(task, 0, p)] * rnd.randint(3, 40)
        runs += [(task, 1, clip(p + 0.03))] * rnd.randint(3, 40)
    rnd.shuffle(runs)
    return runs


def uneven_harness(count: int) -> Suite:
    """`count` tasks in harness order, each with 3 to 40 runs per tier (each tier its own
    count), over 4 subtests whose rates are the task's -0.2, -0.07, +0.07, +0.2 (the task's
    rate U(0.05, 0.95)), run subtest by subtest, T0's block then T1's; T1 = T0 + 0.03."""

    def make(rnd: random.Random) -> list[Run]:
        out: list[Run] = []
        for task in range(count):
            base = rnd.uniform(0.05, 0.95)
            counts = [rnd.randint(3, 40), rnd.randint(3, 40)]
            for k, shift in enumerate((-0.2, -0.07, 0.07, 0.2)):
                p = clip(base + shift)
                for tier in (0, 1):
                    block = counts[tier] // 4 + (k < counts[tier] % 4)
                    out += [(task, tier, clip(p + 0.03 * tier))] * block
        return out

    return make


@dataclass
class Outcome:
    """One simulated suite: did both intervals cover at every look, was T1 - T0 significant
    at the end, and the oracle's verdict there."""

    covered: bool
    rate_covered: bool
    significant: bool
    oracle: bool
    width: float
    oracle_width: float
    runs_alone_width: float


def walk(runs: list[Run], rnd: random.Random, every: int = LOOK_EVERY) -> Outcome:
    """Feed the runs one by one (the i-th completing at time i), looking every `every` runs up
    to 1,000 and then every 2 % more runs, and at the end."""
    strata: dict[tuple[int, int], Outcomes] = {}
    rates: dict[tuple[int, int], list[float]] = {}
    covered = rate_covered = True
    difference = None
    next_look = every
    for i, (task, tier, p) in enumerate(runs):
        key = (task, tier)
        passed = rnd.random() < p
        strata[key] = strata.get(key, Outcomes()).add(passed, float(passed), i)
        rates.setdefault(key, []).append(p)
        if i + 1 < next_look and i + 1 < len(runs):
            continue
        next_look = i + 1 + (every if i < 1000 else max(every, (i + 1) // 50))
        closed = {tier: _closed(strata, tier) for tier in (0, 1)}
        paired = sorted(t for t, s in strata if s == 0 and (t, 1) in strata)
        pairs = [
            Paired(strata[(t, 1)], strata[(t, 0)], _later(closed[1][t], closed[0][t]))
            for t in paired
        ]
        difference = paired_difference(pairs, CONFIDENCE)
        if difference is not None:
            true = math.fsum(_mean(rates[(t, 1)]) - _mean(rates[(t, 0)]) for t in paired)
            covered &= difference.low <= true / len(paired) <= difference.high
        ran = sorted(t for t, s in strata if s == 1)
        rate = suite_mean([strata[(t, 1)] for t in ran], CONFIDENCE)
        if rate is not None:
            true = math.fsum(_mean(rates[(t, 1)]) for t in ran)
            rate_covered &= rate.low <= true / len(ran) <= rate.high
    assert difference is not None
    oracle, oracle_width = _oracle(strata, rates)
    # the run-level test alone, as if no experiment had closed (issue 31's, at 85 % of the error)
    alone = paired_difference([p._replace(closed=None) for p in pairs], CONFIDENCE)
    assert alone is not None
    return Outcome(
        covered,
        rate_covered,
        difference.low > 0,
        oracle,
        (difference.high - difference.low) / 2,
        oracle_width,
        (alone.high - alone.low) / 2,
    )


def _closed(strata: dict[tuple[int, int], Outcomes], tier: int) -> dict[int, int | None]:
    """When each task of `tier` closed (as the suite's report reads it)."""
    tasks = sorted(t for t, s in strata if s == tier)
    return dict(zip(tasks, closings([strata[(t, tier)] for t in tasks]), strict=True))


def _later(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


def _mean(rates: list[float]) -> float:
    """The true rate of a stratum's runs so far."""
    return math.fsum(rates) / len(rates)


def _oracle(
    strata: dict[tuple[int, int], Outcomes], rates: dict[tuple[int, int], list[float]]
) -> tuple[bool, float]:
    """A fixed-sample z-test of the final difference of all runs with the true rates'
    variance, read once: its verdict, and its interval's half-width."""
    paired = sorted(t for t, s in strata if s == 0 and (t, 1) in strata)
    variance = 0.0
    estimate = 0.0
    for t in paired:
        for tier, sign in ((1, 1), (0, -1)):
            o = strata[(t, tier)]
            estimate += sign * o.passes / o.runs
            variance += math.fsum(p * (1 - p) for p in rates[(t, tier)]) / o.runs**2
    half_width = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2) * math.sqrt(variance) / len(paired)
    return estimate / len(paired) > half_width, half_width


def twice(rnd: random.Random) -> list[Run]:
    """T1 runs 40 times a task, T0 20 (tiers with other subtests), rates U(0.02, 0.98),
    T1 = T0 + 0.05; 30 tasks, task by task."""
    rates = [uniform(rnd) for _ in range(30)]
    return by_task([([p] * 20, [clip(p + 0.05)] * 40) for p in rates], rnd)


ROWS: dict[str, list[tuple[str, Suite]]] = {
    "tuned": [
        ("30 tasks, rates U(0.02, 0.98), no difference, task by task", flat(30, 20, uniform, 0.0))
    ],
    "heldout": [
        ("clustered tasks, T1 helps some clusters and hurts one", clustered),
        ("T0 twice as fast as T1, T1 = T0 + 0.05", speeds),
        ("T1 missing from a third of 45 tasks", missing),
        ("4 subtests a task, rates -0.3 to +0.3 apart, blocked, T1 = T0 - 0.05", harness(-0.05)),
        ("rates near 0 or 1, epoch by epoch, T1 = T0 - 0.03", epochs),
        ("60 tasks, 3 to 40 runs a tier, shuffled, T1 = T0 + 0.03", uneven),
        ("T1 runs twice as often as T0, T1 = T0 + 0.05", twice),
    ],
    "narrowing": [
        (
            f"{n:,} tasks, 3 to 40 runs a tier, 4 subtests, harness order, T1 = T0 + 0.03",
            uneven_harness(n),
        )
        for n in (25, 250, 2500)
    ],
    "power": [
        ("30 tasks, U(0.05, 0.85), +0.10", flat(30, 20, lambda r: r.uniform(0.05, 0.85), 0.10)),
        ("40 tasks, U(0.05, 0.85), +0.10", flat(40, 20, lambda r: r.uniform(0.05, 0.85), 0.10)),
        ("50 tasks, U(0.05, 0.85), +0.10", flat(50, 20, lambda r: r.uniform(0.05, 0.85), 0.10)),
        (
            "30 tasks, rates near 0 or 1 (Beta(0.5, 0.5) within 0.05-0.85), +0.10",
            flat(30, 20, lambda r: 0.05 + 0.8 * r.betavariate(0.5, 0.5), 0.10),
        ),
        ("50 tasks, 4 subtests a task, blocked, +0.10", harness(0.10, 50)),
    ],
}


def simulate(section: str, row: int, seeds: range) -> list[Outcome]:
    make = ROWS[section][row][1]
    out = []
    for seed in seeds:
        rnd = random.Random(seed)
        out.append(walk(make(rnd), rnd))
    return out


def chunks(count: int, parts: int, first: int) -> Iterator[range]:
    step = -(-count // parts)
    for start in range(0, count, step):
        yield range(first + start, first + min(count, start + step))


FIRST_SEEDS: Final = {"tuned": 0, "heldout": 100_000, "narrowing": 300_000, "power": 200_000}
NARROWING_SUITES: Final = 200
"""Suites a `narrowing` row runs (40 with --quick): a suite of 2,500 tasks takes seconds."""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a fifth of the suites a row")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--section", action="append", choices=list(ROWS), help="only these")
    args = parser.parse_args(argv)
    started = time.monotonic()
    sections = args.section or list(ROWS)
    print(f"Command: .venv/bin/python -m bench.suite_comparison {' '.join(argv)}".rstrip())
    with ProcessPoolExecutor(args.jobs) as pool:
        for section in sections:
            count = NARROWING_SUITES if section == "narrowing" else 1000
            count //= 5 if args.quick else 1
            print(f"\n### {section}\n")
            print(
                "| suite | suites | covered at every look | pass rate covered | significant "
                "| oracle | half-width | oracle's | runs alone |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            for i, (name, _) in enumerate(ROWS[section]):
                first = 1000 * (i + 1) + FIRST_SEEDS[section]
                jobs = [
                    pool.submit(simulate, section, i, seeds) for seeds in chunks(count, 8, first)
                ]
                results = [o for job in jobs for o in job.result()]
                n = len(results)
                widths = sorted(o.width for o in results)
                oracle_widths = sorted(o.oracle_width for o in results)
                alone = sorted(o.runs_alone_width for o in results)
                print(
                    f"| {name} | {n} | {sum(o.covered for o in results) / n:.1%} "
                    f"| {sum(o.rate_covered for o in results) / n:.1%} "
                    f"| {sum(o.significant for o in results) / n:.1%} "
                    f"| {sum(o.oracle for o in results) / n:.1%} "
                    f"| {widths[n // 2]:.3f} | {oracle_widths[n // 2]:.3f} "
                    f"| {alone[n // 2]:.3f} |",
                    flush=True,
                )
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
