"""Seeded simulations of what the drop page and the intervals promise (docs/statistics.md).

    .venv/bin/python bench/detection.py [--quick] [--jobs 2] [--only SECTIONS]
    (or: make simulate)

Sections, each a markdown table on stdout:
- `false`: false pages of the defaults at stationary pass rates 5 %-95 %, stepping
  `DropState.observe` run by run over many tiers (the core the worker and replay call);
- `delay`: detection delays (runs from the drop to the page) over a grid of falls;
- `heldout`: the issue's targets on held-out data, through `stream-app backtest --json -` (the
  command a team runs on its own history): shapes and seeds other than those the design was
  tried on — other score distributions (beta, not normal), 1,000 and 3,000 runs before the drop
  (not 2,000), stationary tiers at every 5 % step;
- `intervals`: coverage of the 95 % sequences read after every run, and the power to flag a
  20-point difference with 400 runs a tier among six comparisons.

Seeds are fixed: the same command prints the same figures on any machine.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stream_app.core.config import CoreConfig  # noqa: E402
from stream_app.core.drop_detector import DropDesign, DropState  # noqa: E402
from stream_app.metrics.intervals import difference_sequence, mean_sequence  # noqa: E402

RATES = tuple(round(0.05 * k, 2) for k in range(1, 20))


@dataclass(frozen=True)
class Scores:
    """Judge scores per outcome: `normal` (mean, sd) clipped to [0, 1] (the shape the design
    was tried on), or `beta` (alpha, beta) (the held-out shape)."""

    kind: str
    passed: tuple[float, float]
    failed: tuple[float, float]

    def __call__(self, rnd: random.Random, ok: bool) -> float:
        a, b = self.passed if ok else self.failed
        if self.kind == "beta":
            return rnd.betavariate(a, b)
        return min(1.0, max(0.0, rnd.gauss(a, b)))


TUNING = Scores("normal", (0.92, 0.05), (0.40, 0.20))
HELD_OUT = Scores("beta", (17, 3), (2, 3))  # passed ~0.85 (sd 0.08), failed ~0.40 (sd 0.20)
A_LEVEL = Scores("beta", (38, 2), (2, 3))  # passed ~0.95: composite A
D_LEVEL = Scores("beta", (8, 12), (2, 3))  # passed ~0.40: composite D


@dataclass(frozen=True)
class Shape:
    """A tier's runs: `before` runs at `rate` with `scores`, then `after` runs at `rate_after`
    with `scores_after`."""

    rate: float
    scores: Scores
    before: int
    rate_after: float | None = None
    scores_after: Scores | None = None
    after: int = 0

    def runs(self, rnd: random.Random) -> Iterator[tuple[float, float]]:
        """(passed, judge score) of every run."""
        for i in range(self.before + self.after):
            late = i >= self.before
            rate = self.rate_after if late and self.rate_after is not None else self.rate
            scores = self.scores_after if late and self.scores_after is not None else self.scores
            ok = rnd.random() < rate
            yield (1.0 if ok else 0.0), scores(rnd, ok)


def first_pages(shape: Shape, seed: int, design: DropDesign) -> tuple[int, int | None]:
    """One tier through the detectors: (pages before the drop, runs from the drop to its
    first page or None)."""
    rnd = random.Random(seed)
    state = DropState()
    false = 0
    for i, (passed, score) in enumerate(shape.runs(rnd)):
        state, page = state.observe(passed, score, design)
        if page is None:
            continue
        if i < shape.before:
            false += 1
        else:
            return false, i - shape.before + 1
    return false, None


def _stationary(args: tuple[float, int, int, int]) -> tuple[float, int, int]:
    rate, tiers, runs, seed = args
    design = CoreConfig().drop_design
    shape = Shape(rate, TUNING, runs)
    pages = sum(first_pages(shape, seed * 1000 + t, design)[0] for t in range(tiers))
    return rate, tiers * runs, pages


def false_pages(quick: bool, jobs: int) -> str:
    """Stationary tiers at every 5 % step, and a few long-lived ones (the reference stays after
    drop_reference_runs: does a tier of 100,000 runs page more?)."""
    tiers, runs = (20, 5_000) if quick else (100, 10_000)
    work = [(rate, tiers, runs, 7 + k) for k, rate in enumerate(RATES)]
    long_tiers, long_runs = (4, 50_000) if quick else (20, 100_000)
    long_work = [(rate, long_tiers, long_runs, 70 + k) for k, rate in enumerate((0.3, 0.6, 0.9))]
    with ProcessPoolExecutor(jobs) as pool:
        rows = list(pool.map(_stationary, work))
        long_rows = list(pool.map(_stationary, long_work))
    total = sum(r[1] for r in rows)
    pages = sum(r[2] for r in rows)
    lines = [
        f"False pages, defaults, {tiers} tiers x {runs:,} runs per pass rate "
        f"(judge scores: passed N(0.92, 0.05), failed N(0.40, 0.20)):",
        "",
        "| pass rate | runs | false pages | per 1,000,000 runs |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r:.0%} | {n:,} | {p} | {p / n * 1e6:.2f} |" for r, n, p in rows]
    lines.append(
        f"| all | {total:,} | {pages} | {pages / total * 1e6:.2f} (bound: "
        f"{1e6 / CoreConfig().drop_false_page_runs:.2f}) |"
    )
    lines += [
        "",
        f"Long-lived tiers, {long_tiers} tiers x {long_runs:,} runs per pass rate:",
        "",
        "| pass rate | runs | false pages | per 1,000,000 runs |",
        "|---|---|---|---|",
        *(f"| {r:.0%} | {n:,} | {p} | {p / n * 1e6:.2f} |" for r, n, p in long_rows),
    ]
    return "\n".join(lines)


def _delays(args: tuple[str, Shape, int, int]) -> tuple[str, list[int | None]]:
    name, shape, tiers, seed = args
    design = CoreConfig().drop_design
    return name, [first_pages(shape, seed * 1000 + t, design)[1] for t in range(tiers)]


def summarise(delays: Sequence[int | None], within: int = 500) -> tuple[int, float, float]:
    """(tiers paged within `within` runs, median delay, 90th percentile), a missed tier counted
    as never (infinite)."""
    ordered = sorted(d if d is not None and d <= within else 10**9 for d in delays)
    paged = sum(1 for d in ordered if d < 10**9)
    median = statistics.median(ordered)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return paged, median, p90


def _text(value: float) -> str:
    return "never" if value >= 10**9 else f"{value:g}"


def delays(quick: bool, jobs: int) -> str:
    """A grid of falls, 2,000 runs before each."""
    tiers = 40 if quick else 200
    grid = [
        (0.95, 0.75),
        (0.9, 0.7),
        (0.9, 0.6),
        (0.9, 0.3),
        (0.7, 0.5),
        (0.7, 0.3),
        (0.5, 0.3),
        (0.5, 0.1),
        (0.3, 0.1),
        (0.2, 0.05),
    ]
    work = [
        (f"{a:.0%} -> {b:.0%}", Shape(a, TUNING, 2000, b, None, 500), tiers, 100 + k)
        for k, (a, b) in enumerate(grid)
    ]
    work.append(("scores A -> D at 90 %", Shape(0.9, A_LEVEL, 2000, 0.9, D_LEVEL, 500), tiers, 200))
    with ProcessPoolExecutor(jobs) as pool:
        rows = list(pool.map(_delays, work))
    lines = [
        f"Detection delay in runs, defaults, 2,000 runs before the drop, {tiers} tiers each:",
        "",
        "| fall | paged within 500 runs | median | 90th percentile |",
        "|---|---|---|---|",
    ]
    for name, found in rows:
        paged, median, p90 = summarise(found)
        lines.append(f"| {name} | {paged}/{len(found)} | {_text(median)} | {_text(p90)} |")
    return "\n".join(lines)


# Held-out: event files through `stream-app backtest --json -`.

START = datetime(2026, 3, 1, tzinfo=UTC)


def event(tier_no: int, run: int, passed: float, score: float, experiment: str) -> bytes:
    """One run-completed event of tier T1..T20 of `experiment` (cost given: no pricing)."""
    completed = START + timedelta(seconds=run * 30 + tier_no)
    tier = f"T{tier_no}"
    return json.dumps(
        {
            "schema_version": 1,
            "run_id": f"{experiment}/{tier}/{run:06d}",
            "experiment_id": experiment,
            "tier": tier,
            "model": "claude-haiku-4-5",
            "subtest": "00",
            "run_number": run + 1,
            "passed": passed == 1.0,
            "judgment": {"summary": {"weighted_score": round(score, 6)}},
            "tokens": {"input": 10, "output": 100, "cache_creation": 0, "cache_read": 0},
            "cost_usd": 0.01,
            "started_at": (completed - timedelta(seconds=20)).isoformat(),
            "completed_at": completed.isoformat(),
        },
        separators=(",", ":"),
    ).encode()


def held_out_lines(shapes: Sequence[Shape], seed: int, experiment: str) -> Iterator[bytes]:
    """The runs of one tier per shape (T1, T2, ...), interleaved run by run as they complete."""
    streams = [shape.runs(random.Random(seed * 1000 + t)) for t, shape in enumerate(shapes)]
    longest = max(s.before + s.after for s in shapes)
    for run in range(longest):
        for t, stream in enumerate(streams):
            step = next(stream, None)
            if step is not None:
                yield event(t + 1, run, *step, experiment)


def backtest(lines: Iterator[bytes]) -> dict[str, Any]:
    """`stream-app backtest --json -` of the lines (streamed to its stdin)."""
    with subprocess.Popen(
        [sys.executable, "-m", "stream_app", "backtest", "--json", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        for line in lines:
            proc.stdin.write(line + b"\n")
        proc.stdin.close()
        out = proc.stdout.read()
        if proc.wait() != 0:
            raise SystemExit(f"stream-app backtest exited with {proc.returncode}")
    document: dict[str, Any] = json.loads(out)
    return document


def run_of(run_id: str) -> int:
    """The run number within its tier, from the run id `event` wrote."""
    return int(run_id.rsplit("/", 1)[1])


def held_out_drop(name: str, shape: Shape, tiers: int, seed: int) -> tuple[str, list[int | None]]:
    """20 tiers of one shape through backtest: each tier's delay (None: no page after the drop);
    a page before the drop is a false page and fails the run."""
    report = backtest(held_out_lines([shape] * tiers, seed, f"heldout-{seed}"))
    first: dict[str, int] = {}
    for page in report["pages"]:
        run = run_of(page["run_id"])
        if run < shape.before:
            raise SystemExit(f"{name}: a false page before the drop: {page}")
        first.setdefault(page["tier"], run - shape.before + 1)
    return name, [first.get(f"T{t + 1}") for t in range(tiers)]


def _held_out(args: tuple[str, Shape, int, int]) -> tuple[str, list[int | None]]:
    return held_out_drop(*args)


def _held_out_stationary(args: tuple[float, int, int, int]) -> tuple[float, int, int]:
    rate, tiers, runs, seed = args
    shapes = [Shape(rate, HELD_OUT, runs)] * tiers
    report = backtest(held_out_lines(shapes, seed, f"stationary-{seed}"))
    return rate, tiers * runs, len(report["pages"])


TARGETS = {  # the median delay targets
    "90 % -> 30 %": 20,
    "90 % -> 60 %": 60,
    "50 % -> 10 %": 60,
    "scores A -> D": 40,
}


def held_out(quick: bool, jobs: int) -> str:
    """The issue's targets on held-out shapes and seeds, through `stream-app backtest`."""
    tiers = 20
    work: list[tuple[str, Shape, int, int]] = []
    for k, before in enumerate((1000, 3000)):
        for name, rate, after, scores, scores_after in (
            ("90 % -> 30 %", 0.9, 0.3, HELD_OUT, None),
            ("90 % -> 60 %", 0.9, 0.6, HELD_OUT, None),
            ("50 % -> 10 %", 0.5, 0.1, HELD_OUT, None),
            ("scores A -> D", 0.9, 0.9, A_LEVEL, D_LEVEL),
        ):
            shape = Shape(rate, scores, before, after, scores_after, 500)
            work.append((f"{name}|{before}", shape, tiers, 5000 + 10 * k + len(work)))
    stationary_runs = 5_000 if quick else 20_000
    still = [(rate, 10, stationary_runs, 9000 + k) for k, rate in enumerate(RATES)]
    with ProcessPoolExecutor(jobs) as pool:
        drops = list(pool.map(_held_out, work))
        calm = list(pool.map(_held_out_stationary, still))
    lines = [
        "Held-out targets through `stream-app backtest --json -` (20 tiers per row; judge scores "
        "from beta distributions; drops after 1,000 or 3,000 runs; seeds 5000+):",
        "",
        "| fall | runs before | paged within 500 | target | median delay | target |",
        "|---|---|---|---|---|---|",
    ]
    for name, found in drops:
        fall, runs_before = name.split("|")
        paged, median, _ = summarise(found)
        ok = paged >= 19 and median <= TARGETS[fall]
        lines.append(
            f"| {fall} | {int(runs_before):,} | {paged}/{len(found)} | >= 19/20 | {_text(median)} | "
            f"<= {TARGETS[fall]} {'ok' if ok else 'MISSED'} |"
        )
    total = sum(r[1] for r in calm)
    pages = sum(r[2] for r in calm)
    lines += [
        "",
        f"Stationary tiers through backtest, 10 tiers x {stationary_runs:,} runs at each pass "
        "rate 5 %-95 %:",
        "",
        "| pass rate | runs | pages |",
        "|---|---|---|",
        *(f"| {r:.0%} | {n:,} | {p} |" for r, n, p in calm),
        f"| all | {total:,} | {pages} (target: at most {total / 200_000:.1f}) |",
    ]
    return "\n".join(lines)


# Intervals.


def _mean_coverage(args: tuple[float, int, int, int]) -> tuple[float, float]:
    rate, tiers, runs, seed = args
    rnd = random.Random(seed)
    missed = 0
    for _ in range(tiers):
        passes = 0
        for n in range(1, runs + 1):
            passes += rnd.random() < rate
            low, high = mean_sequence(passes, n)
            if not low <= rate <= high:
                missed += 1
                break
    return rate, 1 - missed / tiers


def _difference_coverage(args: tuple[float, float, int, int, int]) -> tuple[str, float]:
    a, b, experiments, runs, seed = args
    rnd = random.Random(seed)
    missed = 0
    for _ in range(experiments):
        sums, counts, arm = [0, 0], [0, 0], 0
        for _ in range(2 * runs):
            if rnd.random() < 0.1:  # bursts: the two tiers' runs do not alternate
                arm = 1 - arm
            sums[arm] += rnd.random() < (a, b)[arm]
            counts[arm] += 1
            low, high = difference_sequence(sums[0], counts[0], sums[1], counts[1])
            if not low <= a - b <= high:
                missed += 1
                break
    return f"{a:.0%} vs {b:.0%}", 1 - missed / experiments


def _power(args: tuple[float, float, int, int]) -> tuple[str, float]:
    a, b, experiments, seed = args
    rnd = random.Random(seed)
    each = 1 - 0.05 / 6
    seen = 0
    for _ in range(experiments):
        pa = sum(rnd.random() < a for _ in range(400))
        pb = sum(rnd.random() < b for _ in range(400))
        seen += difference_sequence(pa, 400, pb, 400, each).low > 0
    return f"{a:.0%} vs {b:.0%}", seen / experiments


def intervals(quick: bool, jobs: int) -> str:
    """Coverage read after every run, and power."""
    tiers, runs = (200, 500) if quick else (1000, 1000)
    with ProcessPoolExecutor(jobs) as pool:
        means = list(
            pool.map(_mean_coverage, [(r, tiers, runs, 300 + k) for k, r in enumerate(RATES)])
        )
        pairs = [(0.5, 0.5), (0.9, 0.9), (0.9, 0.6), (0.3, 0.1), (0.95, 0.05), (0.05, 0.05)]
        differences = list(
            pool.map(
                _difference_coverage,
                [(a, b, tiers, runs, 400 + k) for k, (a, b) in enumerate(pairs)],
            )
        )
        powers = list(
            pool.map(
                _power,
                [
                    (a, b, 2000, 500 + k)
                    for k, (a, b) in enumerate(
                        [(0.6, 0.4), (0.7, 0.5), (0.9, 0.7), (0.3, 0.1), (0.95, 0.75)]
                    )
                ],
            )
        )
    lines = [
        f"Coverage of the 95 % confidence sequence of a pass rate, read after every run of "
        f"{runs:,} ({tiers:,} tiers per rate): the share of tiers it never missed:",
        "",
        "| pass rate | " + " | ".join(f"{r:.0%}" for r, _ in means) + " |",
        "|---|" + "---|" * len(means),
        "| covered | " + " | ".join(f"{c:.3f}" for _, c in means) + " |",
        "",
        f"Coverage of the 95 % sequence of a difference, read after every run ({runs:,} runs "
        "a tier, arriving in bursts):",
        "",
        "| pass rates | covered |",
        "|---|---|",
        *(f"| {n} | {c:.3f} |" for n, c in differences),
        "",
        "Power: a true 20-point difference, 400 runs a tier, six comparisons held together "
        "(each interval at 1 - 0.05/6), 2,000 experiments:",
        "",
        "| pass rates | flagged significant |",
        "|---|---|",
        *(f"| {n} | {p:.3f} |" for n, p in powers),
    ]
    return "\n".join(lines)


SECTIONS = {"false": false_pages, "delay": delays, "heldout": held_out, "intervals": intervals}


def main(argv: list[str]) -> int:
    """Print the sections asked for."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer tiers: minutes, not tens")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    args = parser.parse_args(argv)
    design = CoreConfig().drop_design
    print(
        f"Design: drop_false_page_runs={design.false_page_runs:,.0f} (each detector's "
        f"threshold {design.threshold:,.0f}), drop_smallest_fall={design.smallest_fall}, "
        f"drop_warmup_runs={design.warmup_runs}, drop_reference_runs={design.reference_runs}, "
        f"drop_reference_z={design.reference_z}\n",
        flush=True,
    )
    for name in args.only.split(","):
        print(SECTIONS[name](args.quick, args.jobs), end="\n\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
