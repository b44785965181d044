"""Seeded simulations of harness-shaped traffic through the real core: false pages and detection
delays of the drop detectors of both scopes (each `(experiment, tier)` with a reference per
subtest, and each `(suite, tier)` pooling a suite's experiments).

    .venv/bin/python -m bench.harness [--quick] [--jobs 2] [--only SECTIONS]

Every run is a `run-completed` event (JSON bytes) fed to `Replay(CoreConfig())` as `backtest`
reads a file, and the pages are `Replay.pages` (scopes "experiment" and "suite"). Sections,
each a markdown table on stdout:
- `blocked`: stationary suites of 4 experiments x 5 tiers, 24 subtests a tier, run in a harness's
  order (blocks of 10 or 3 runs of a subtest, epoch-major, skips and reruns, a new subtest);
- `detect`: a nightly suite of 40 tasks x tiers T0 and T1, 5 runs a task and tier a night, with
  T1 regressing on every task or on a quarter of them: delays, beside an oracle Shiryaev-Roberts
  that knows the true pass rates;
- `nightly`: the same nightly suite, stationary (and the detection suites' nights before their
  change);
- `heldout`: the same on shapes and seeds not tried before (other base rates, 3 runs a night).

Seeds are fixed: the same command prints the same figures on any machine.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stream_app.core.config import CoreConfig  # noqa: E402
from stream_app.core.replay import Page, Replay  # noqa: E402

MODEL = "claude-sonnet-4-5"
START = datetime(2025, 1, 1, tzinfo=UTC)
PER = 200_000
"""False pages are reported per this many runs (the target: at most 1, every scope counted)."""
ORACLE_THRESHOLD = 2e6


# Events.


def judge_score(rnd: random.Random, passed: bool) -> float:
    """The judge's weighted score: passed runs ~ N(0.85, 0.1), failed ~ N(0.3, 0.2), clipped."""
    mean, sd = (0.85, 0.1) if passed else (0.3, 0.2)
    return min(1.0, max(0.0, rnd.gauss(mean, sd)))


def event(
    rnd: random.Random,
    *,
    run_id: str,
    experiment_id: str,
    tier: str,
    subtest: str,
    passed: bool,
    completed: datetime,
    suite: str | None = None,
) -> bytes:
    """One valid run-completed event as compact JSON (no cost: priced from its tokens)."""
    duration = rnd.uniform(30.0, 300.0)
    doc: dict[str, Any] = {
        "schema_version": 1,
        "run_id": run_id,
        "experiment_id": experiment_id,
        "tier": tier,
        "model": MODEL,
        "subtest": subtest,
        "passed": passed,
        "judgment": {"summary": {"weighted_score": round(judge_score(rnd, passed), 6)}},
        "tokens": {
            "input": rnd.randint(20, 400),
            "output": rnd.randint(50, 3000),
            "cache_creation": rnd.randint(0, 5000),
            "cache_read": rnd.randint(0, 50_000),
        },
        "started_at": (completed - timedelta(seconds=duration)).isoformat(),
        "completed_at": completed.isoformat(),
    }
    if suite is not None:
        doc["suite"] = suite
    return json.dumps(doc, separators=(",", ":")).encode()


def spread_rate(rnd: random.Random) -> float:
    """A pass rate spread like real evals' subtests: 15 % always fail, 30 % always pass, the
    rest Beta(4, 1)."""
    u = rnd.random()
    if u < 0.15:
        return 0.0
    if u < 0.45:
        return 1.0
    return rnd.betavariate(4, 1)


# Stationary suites in a harness's order.

SUBTESTS = 24
SHAPES = ("blocked-10", "blocked-3", "epoch-major", "skips-reruns", "new-subtest")


def harness_order(shape: str, rnd: random.Random, runs: int) -> Iterator[int]:
    """The subtest of each of a tier's `runs` runs, in the harness's order: sweeps over the
    subtests, each run `block` times back to back. `skips-reruns` skips 5 of the 24 subtests a
    sweep (a random 20 %) and reruns one of the others twice (two more blocks at the sweep's
    end); `new-subtest` adds a 25th subtest to every sweep from half-way on."""
    block = {"blocked-3": 3, "epoch-major": 1}.get(shape, 10)
    done = 0
    while done < runs:
        subtests = list(range(SUBTESTS))
        if shape == "new-subtest" and done >= runs // 2:
            subtests.append(SUBTESTS)
        if shape == "skips-reruns":
            skipped = set(rnd.sample(subtests, round(0.2 * SUBTESTS)))
            subtests = [s for s in subtests if s not in skipped]
            subtests += [rnd.choice(subtests)] * 2
        for subtest in subtests:
            for _ in range(block):
                if done == runs:
                    return
                yield subtest
                done += 1


class Stationary(NamedTuple):
    """Runs fed, and every page (both scopes)."""

    runs: int
    pages: list[Page]


def stationary(
    shape: str, seed: int, experiments: int = 4, tier: str = "T1", runs: int = 10_000
) -> Stationary:
    """One tier of `experiments` experiments (one suite: the model) through the core, each
    experiment's stream `runs` runs in `shape`'s harness order, a minute apart; the streams run
    side by side (run i of every experiment, then run i + 1), so that event time increases in
    the order fed. Each experiment's 25 subtest pass rates are drawn by `spread_rate`."""
    replay = Replay(CoreConfig())
    streams = []
    rates = []
    for e in range(experiments):
        rnd = random.Random(seed * 1_000_003 + e)
        rates.append([spread_rate(rnd) for _ in range(SUBTESTS + 1)])
        streams.append((rnd, harness_order(shape, random.Random(rnd.random()), runs)))
    line = 0
    for i in range(runs):
        for e, (rnd, order) in enumerate(streams):
            subtest = next(order)
            line += 1
            raw = event(
                rnd,
                run_id=f"{shape}-{seed}/exp-{e:02d}/{tier}/{i:06d}",
                experiment_id=f"exp-{e:02d}",
                tier=tier,
                subtest=f"{subtest:02d}",
                passed=rnd.random() < rates[e][subtest],
                completed=START + timedelta(minutes=i, seconds=5 * e),
            )
            replay.feed(raw, line)
    replay.aggregates()
    return Stationary(line, list(replay.pages))


# The nightly suite.


@dataclass(frozen=True)
class Nightly:
    """A nightly suite's shape: `tasks` experiments, tiers T0 and T1, `runs` runs of each task
    and tier a night (task by task, T0 then T1, two minutes apart from 01:00 UTC), base pass
    rates drawn by `rates`; from `change` (a night, None: never) a `share` of the tasks' T1
    passes at `odds` times the odds of its base rate."""

    nights: int
    tasks: int = 40
    runs: int = 5
    rates: str = "beta-7-3"
    change: int | None = None
    odds: float = 1.0
    share: float = 1.0
    stop: bool = True
    """Stop feeding the core at the end of the night the drop is paged."""

    def base_rate(self, rnd: random.Random) -> float:
        """A task's base pass rate."""
        if self.rates == "beta-7-3":
            return rnd.betavariate(7, 3)
        if self.rates == "beta-2-1":
            return rnd.betavariate(2, 1)
        if self.rates == "zero-one-mix":
            return spread_rate(rnd)
        raise ValueError(f"unknown base rates {self.rates!r}")


class Detection(NamedTuple):
    """One nightly suite through the core: runs fed; the delay in T1 runs (of the whole suite,
    from the first after the change) to the first page of the drop (a page on T1 of the suite or
    of a task that fell; None: none) and its scope; the oracle's delay; every other page; the
    runs before the change."""

    runs: int
    delay: int | None
    scope: str | None
    oracle: int | None
    false_pages: list[Page]
    before: int
    """Runs fed before the change (every run when there is none)."""

    def stationary_pages(self) -> int:
        """False pages before the change."""
        return sum(1 for p in self.false_pages if p.line <= self.before)


def regressed(p: float, odds: float) -> float:
    """The pass rate at `odds` times the odds of passing at `p`."""
    return p * odds / (1 - p + p * odds)


def nightly(seed: int, shape: Nightly) -> Detection:
    """One nightly suite (suite: the model) through the core, night by night (`Replay.flush`
    after each night); the oracle runs beside it on the same runs: Shiryaev-Roberts over the
    suite's T1 runs from the change, each run's true Bernoulli likelihood ratio of its post-change
    rate against its pre-change rate, R <- (1 + R) LR, paging at R >= 2e6."""
    rnd = random.Random(seed)
    base = [shape.base_rate(rnd) for _ in range(shape.tasks)]
    fell = set(range(shape.tasks))
    if shape.share < 1:
        fell = set(rnd.sample(range(shape.tasks), round(shape.share * shape.tasks)))
    replay = Replay(CoreConfig())
    line = 0
    after: list[int] = []  # lines of the T1 runs fed after the change
    oracle_r, oracle, t1_after = 0.0, None, 0
    feeding, delay, scope = True, None, None
    for night in range(shape.nights):
        dropped = shape.change is not None and night >= shape.change
        at = START + timedelta(days=night, hours=1)
        k = 0
        for task in range(shape.tasks):
            for tier in ("T0", "T1"):
                p0 = base[task]
                p = regressed(p0, shape.odds) if dropped and tier == "T1" and task in fell else p0
                for j in range(shape.runs):
                    passed = rnd.random() < p
                    raw = event(
                        rnd,
                        run_id=f"s{seed}/task-{task:02d}/{tier}/{night:04d}-{j}",
                        experiment_id=f"task-{task:02d}",
                        tier=tier,
                        subtest="00",
                        passed=passed,
                        completed=at + timedelta(minutes=2 * k),
                    )
                    k += 1
                    if feeding:
                        line += 1
                        replay.feed(raw, line)
                    if not (dropped and tier == "T1"):
                        continue
                    t1_after += 1
                    if feeding:
                        after.append(line)
                    if oracle is None:
                        oracle_r = (1 + oracle_r) * _likelihood_ratio(p0, p, passed)
                        if oracle_r >= ORACLE_THRESHOLD:
                            oracle = t1_after
        if feeding:
            replay.flush()
        if feeding and shape.change is not None:
            delay, scope = _first_detection(replay.pages, after, fell)
            feeding = delay is None or not shape.stop
    replay.aggregates()
    if shape.change is not None:
        delay, scope = _first_detection(replay.pages, after, fell)
    first = _first_line(replay.pages, after, fell)
    false_pages = [p for p in replay.pages if first is None or p.line < first or not _hit(p, fell)]
    before = after[0] - 1 if after else line
    return Detection(line, delay, scope, oracle, false_pages, before)


def _likelihood_ratio(before: float, now: float, passed: bool) -> float:
    """A run's likelihood at pass rate `now` over that at `before` (1 when they are equal: a
    task at 0 or 1, or one that did not fall)."""
    if now == before:
        return 1.0
    return now / before if passed else (1 - now) / (1 - before)


def _hit(page: Page, fell: set[int]) -> bool:
    """Whether a page is on what fell: T1 of the suite, or T1 of a task that fell."""
    if page.tier != "T1":
        return False
    return page.scope == "suite" or int((page.experiment_id or "task-0").split("-")[1]) in fell


def _first_line(pages: Sequence[Page], after: Sequence[int], fell: set[int]) -> int | None:
    """The line of the first page of the drop: on what fell, at or after the change."""
    if not after:
        return None
    hits = [p.line for p in pages if p.line >= after[0] and _hit(p, fell)]
    return min(hits) if hits else None


def _first_detection(
    pages: Sequence[Page], after: Sequence[int], fell: set[int]
) -> tuple[int | None, str | None]:
    """(delay in T1 runs after the change, scope) of the first page of the drop."""
    first = _first_line(pages, after, fell)
    if first is None:
        return None, None
    scopes = {p.scope for p in pages if p.line == first and _hit(p, fell)}
    scope = "both" if len(scopes) > 1 else scopes.pop()
    return bisect.bisect_right(after, first), scope


# Sizes.


@dataclass(frozen=True)
class Sizes:
    """How much of each section runs."""

    stationary_runs: int
    nightly_suites: int
    nightly_nights: int
    detect_suites: int
    heldout_suites: int
    heldout_changes: tuple[int, ...]
    """The nights the held-out rows' drops come on."""


FULL = Sizes(10_000, 2, 50, 10, 2, (12, 30))
QUICK = Sizes(2_000, 1, 14, 2, 1, (12,))
"""A nightly suite of 40 tasks costs about a minute of a core (its suite tiers' statistics are
computed again after every run): FULL takes about 20 minutes on two idle cores, QUICK 3."""


# Tables.

Job = tuple[Callable[..., Any], tuple[Any, ...]]


def _call(job: Job) -> Any:
    fn, args = job
    return fn(*args)


def _cost(job: Job) -> float:
    """A job's rough cost, to start the longest first: runs fed, a nightly run costing about
    five of a stationary tier's (its suite tier pools ten times the experiments)."""
    fn, args = job
    if fn is nightly:
        shape: Nightly = args[1]
        return 5.0 * shape.nights * shape.runs * shape.tasks * 2
    return float(args[2] * args[4])


def _per(pages: int, runs: int) -> str:
    return f"{pages / runs * PER:.2f}" if runs else "-"


def _text(value: float) -> str:
    return "never" if value >= 10**9 else f"{value:g}"


def summarise(delays: Sequence[int | None], within: int) -> tuple[int, float, float]:
    """(suites paged within `within` T1 runs, median delay, 90th percentile), a suite not paged
    within it counted as never."""
    ordered = sorted(d if d is not None and d <= within else 10**9 for d in delays)
    paged = sum(1 for d in ordered if d < 10**9)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return paged, _middle(ordered), p90


def _middle(ordered: Sequence[float]) -> float:
    """The median of sorted delays, never (10**9) when either middle one is never."""
    if ordered[len(ordered) // 2] >= 10**9:
        return 10**9
    return statistics.median(ordered)


def _median(values: Sequence[int | None]) -> str:
    return _text(_middle(sorted(v if v is not None else 10**9 for v in values)))


class Section(NamedTuple):
    """A section's jobs, how its table is written from their results, and its stationary runs
    and their (false) pages."""

    jobs: list[Job]
    render: Callable[[list[Any], dict[str, list[Any]]], str]
    """From the section's results and those of the sections printed before it."""
    stationary: Callable[[list[Any]], tuple[int, int]]


def _stationary_runs(results: list[Any]) -> tuple[int, int]:
    """Stationary runs and pages of a section's results."""
    if results and isinstance(results[0], Stationary):
        return sum(r.runs for r in results), sum(len(r.pages) for r in results)
    return sum(r.before for r in results), sum(r.stationary_pages() for r in results)


def blocked_section(sizes: Sizes) -> Section:
    """Stationary harness orders: 4 experiments x 5 tiers a shape."""
    tiers = [f"T{t}" for t in range(1, 6)]
    jobs: list[Job] = [
        (stationary, (shape, 100 + 10 * s + t, 4, tier, sizes.stationary_runs))
        for s, shape in enumerate(SHAPES)
        for t, tier in enumerate(tiers)
    ]

    def render(results: list[Any], earlier: dict[str, list[Any]]) -> str:
        lines = [
            f"Stationary suites in a harness's order: 4 experiments x 5 tiers (T1-T5) a shape, "
            f"{sizes.stationary_runs:,} runs a tier, 24 subtests a tier (15 % always fail, 30 % "
            "always pass, the rest Beta(4, 1)), the experiments' streams side by side a minute "
            "apart (one suite, the model: 5 suite tiers of 4 experiments). Every page is false:",
            "",
            f"| shape | runs | experiment pages | suite pages | pages per {PER:,} runs |",
            "|---|---|---|---|---|",
        ]
        for s, shape in enumerate(SHAPES):
            mine: list[Stationary] = results[s * len(tiers) : (s + 1) * len(tiers)]
            runs = sum(r.runs for r in mine)
            tier_pages = sum(1 for r in mine for p in r.pages if p.scope == "experiment")
            suite_pages = sum(1 for r in mine for p in r.pages if p.scope == "suite")
            lines.append(
                f"| {shape} | {runs:,} | {tier_pages} | {suite_pages} | "
                f"{_per(tier_pages + suite_pages, runs)} |"
            )
        return "\n".join(lines)

    return Section(jobs, render, _stationary_runs)


def nightly_section(sizes: Sizes) -> Section:
    """Stationary nightly suites; and, when `detect` ran before, its suites' nights before the
    change (the same shape)."""
    shape = Nightly(nights=sizes.nightly_nights, stop=False)
    jobs: list[Job] = [(nightly, (700 + k, shape)) for k in range(sizes.nightly_suites)]

    def row(name: str, found: list[Detection]) -> str:
        runs = sum(d.before for d in found)
        mine = [p for d in found for p in d.false_pages if p.line <= d.before]
        tier_pages = sum(1 for p in mine if p.scope == "experiment")
        suite_pages = len(mine) - tier_pages
        return f"| {name} | {runs:,} | {tier_pages} | {suite_pages} | {_per(len(mine), runs)} |"

    def render(results: list[Any], earlier: dict[str, list[Any]]) -> str:
        lines = [
            f"Stationary nightly suites: {sizes.nightly_suites} suite(s) x "
            f"{sizes.nightly_nights} nights, 40 tasks x T0/T1, 5 runs a task and tier a night "
            "(400 runs a night, two minutes apart from 01:00 UTC), base pass rates Beta(7, 3); "
            "a tier's own detectors warm up for ~12 nights (50 reference runs after its 10-run "
            "window). Every page is false:",
            "",
            f"| shape | runs | experiment pages | suite pages | pages per {PER:,} runs |",
            "|---|---|---|---|---|",
            row("nightly-stationary", results),
        ]
        found: list[Detection] = earlier.get("detect", [])
        if found:
            lines.append(row(f"nights 0-19 of the {len(found)} detection suites", found))
            lines.append(row("both", [*results, *found]))
        return "\n".join(lines)

    return Section(jobs, render, _stationary_runs)


class Row(NamedTuple):
    """A detection row: its name, shape, limit and targets."""

    name: str
    shape: Nightly
    within: int
    paged_target: int
    median_target: int | None
    seed: int


def detection_rows() -> list[Row]:
    """The rows tuned on (7, 8)."""
    return [
        Row(
            "nightly-all-regress",
            Nightly(nights=30, change=20, odds=0.33),
            400,
            19,
            200,
            1000,
        ),
        Row(
            "nightly-quarter-regress",
            Nightly(nights=40, change=20, odds=0.2, share=0.25),
            2000,
            16,
            None,
            2000,
        ),
    ]


def heldout_rows(changes: Sequence[int] = (12, 30)) -> list[Row]:
    """Held-out shapes: other base rates, 3 runs a task and tier a night, the drop on night 12
    (inside the tiers' warm-up of 50 reference runs: 20 nights at 3 a night) and, to show the
    detectors once warmed up, on night 30."""
    rows = []
    for change in changes:
        for k, (rates, label) in enumerate(
            (("beta-2-1", "Beta(2,1)"), ("zero-one-mix", "0/1 mix"))
        ):
            seed = 3000 + 1000 * k + 100 * change
            rows += [
                Row(
                    f"{label}, all x0.33, night {change}",
                    Nightly(nights=change + 10, runs=3, rates=rates, change=change, odds=0.33),
                    400,
                    19,
                    200,
                    seed,
                ),
                Row(
                    f"{label}, quarter x0.2, night {change}",
                    Nightly(
                        nights=change + 20, runs=3, rates=rates, change=change, odds=0.2, share=0.25
                    ),
                    2000,
                    16,
                    None,
                    seed + 50,
                ),
            ]
    return rows


def detect_section(rows: list[Row], suites: int, title: str) -> Section:
    """Detection rows, `suites` suites each."""
    jobs: list[Job] = [(nightly, (row.seed + k, row.shape)) for row in rows for k in range(suites)]

    def render(results: list[Any], earlier: dict[str, list[Any]]) -> str:
        lines = [
            title,
            "",
            "| scenario | paged within | target | median delay | target | 90th pct | oracle "
            "median | first scope (exp/suite/both) | false pages (exp/suite) | runs |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r, row in enumerate(rows):
            mine: list[Detection] = results[r * suites : (r + 1) * suites]
            delays = [d.delay for d in mine]
            paged, median, p90 = summarise(delays, row.within)
            scaled = round(row.paged_target * suites / 20)
            ok = paged >= scaled and (row.median_target is None or median <= row.median_target)
            scopes = [d.scope for d in mine]
            first = "/".join(str(scopes.count(s)) for s in ("experiment", "suite", "both"))
            tier_false = sum(1 for d in mine for p in d.false_pages if p.scope == "experiment")
            suite_false = sum(1 for d in mine for p in d.false_pages if p.scope == "suite")
            median_target = "-" if row.median_target is None else f"<= {row.median_target}"
            lines.append(
                f"| {row.name} | {paged}/{suites} in {row.within:,} T1 runs | >= {scaled}/{suites} "
                f"| {_text(median)} | {median_target} {'ok' if ok else 'MISSED'} | {_text(p90)} | "
                f"{_median([d.oracle for d in mine])} | {first} | {tier_false}/{suite_false} | "
                f"{sum(d.runs for d in mine):,} |"
            )
        return "\n".join(lines)

    return Section(jobs, render, _stationary_runs)


def sections(sizes: Sizes) -> dict[str, Section]:
    """Every section at `sizes`."""
    return {
        "blocked": blocked_section(sizes),
        "nightly": nightly_section(sizes),
        "detect": detect_section(
            detection_rows(),
            sizes.detect_suites,
            f"Detection, nightly suites of 40 tasks x T0/T1, 5 runs a task and tier a night, base "
            f"rates Beta(7, 3); T1 falls on night 20 (on every task, odds x0.33, 10 nights more; "
            f"or on a random quarter of the tasks, odds x0.2, up to 20 nights more); "
            f"{sizes.detect_suites} suite(s) a row (targets scaled from 20). Delay: T1 runs of the "
            "suite from the first after the change to the first page on the suite's T1 or a "
            "fallen task's T1 (either scope); oracle: Shiryaev-Roberts over the suite's T1 runs "
            "from the change with the true likelihood ratios, threshold 2e6. False pages: any "
            "other page (before the change, on T0, on a task that did not fall):",
        ),
        "heldout": detect_section(
            heldout_rows(sizes.heldout_changes),
            sizes.heldout_suites,
            f"Held-out nightly suites (not tuned on): base rates Beta(2, 1) or a 0/1 mix (15 % "
            f"always fail, 30 % always pass, the rest Beta(4, 1)), 3 runs a task and tier a "
            f"night, the drop on night {' or '.join(map(str, sizes.heldout_changes))} (on night "
            "12 the tiers' own detectors are still warming up: 50 reference runs take 20 nights "
            "at 3 a night); "
            f"{sizes.heldout_suites} "
            "suite(s) a row, columns as above:",
        ),
    }


def main(argv: list[str]) -> int:
    """Print the sections asked for."""
    names = ("blocked", "detect", "nightly", "heldout")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="smaller: about three minutes")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--only", default=",".join(names), help="comma-separated sections")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    design = CoreConfig().drop_design
    print(
        "Harness-shaped traffic through the core: events fed to `Replay(CoreConfig())`, pages "
        "of both scopes (experiment tiers and suite tiers) read from `Replay.pages`.\n"
        f"Command: .venv/bin/python -m bench.harness{' --quick' if args.quick else ''}\n"
        f"Design: drop_false_page_runs={design.false_page_runs:,.0f}, "
        f"drop_smallest_fall={design.smallest_fall}, drop_warmup_runs={design.warmup_runs}, "
        f"drop_reference_runs={design.reference_runs}, drop_reference_z={design.reference_z}. "
        f"Target: at most 1 false page per {PER:,} runs, every scope counted.\n",
        flush=True,
    )
    chosen = [(name, sections(sizes)[name]) for name in args.only.split(",")]
    began = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures: dict[int, Future[Any]] = {}
        jobs = [(i, job) for i, job in enumerate(j for _, s in chosen for j in s.jobs)]
        for i, job in sorted(jobs, key=lambda ij: -_cost(ij[1])):  # the longest first
            futures[i] = pool.submit(_call, job)
        done, runs, pages = 0, 0, 0
        earlier: dict[str, list[Any]] = {}
        try:
            for name, section in chosen:
                results = [futures[done + k].result() for k in range(len(section.jobs))]
                done += len(section.jobs)
                print(section.render(results, earlier), end="\n\n", flush=True)
                earlier[name] = results
                more_runs, more_pages = section.stationary(results)
                runs, pages = runs + more_runs, pages + more_pages
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    print(
        f"Every stationary run above (the stationary tables, and the detection suites before "
        f"their change): {runs:,} runs, {pages} false page(s) of either scope, "
        f"{_per(pages, runs)} per {PER:,} runs (target: at most 1).",
        flush=True,
    )
    print(f"took {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
