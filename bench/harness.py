"""Seeded simulations of harness-shaped traffic through `stream-app backtest --json -`: false pages
and detection delays of the drop detectors of both scopes (each `(experiment, tier)` with a
reference per subtest, and each `(suite, tier)` pooling a suite's experiments), beside an oracle
that knows the true pass rates.

    .venv/bin/python -m bench.harness [--quick] [--jobs 2] [--only SECTIONS]

Every run is a `run-completed` event; each simulated stream is one `stream-app backtest --json -`
(the command a team would run), whose pages are read back. Sections, each a markdown table:
- `shapes`: 4 experiments of one suite, 24 subtests a tier (some always fail, many always pass),
  in a harness's order (blocks of 10 or 3 runs of a subtest, epoch-major, skips and reruns, a new
  subtest); the first experiment's tier falls half-way (odds of passing x0.33 on every subtest);
- `tuned`: the nightly suite the detectors were designed on (40 tasks x T0/T1, 5 runs a task and
  tier a night, base rates Beta(7, 3)), T1 regressing on every task (odds x0.33) or a quarter of
  them (x0.2) on night 20;
- `heldout`: the same targets on shapes not tuned on: other base rates, a drop while references
  are young, tasks in another order each night, epoch-major nights, T1 before T0;
- `fresh`: the same targets on a second set of shapes, written after the last change to the
  design (the suite's change points weighing their runs) and run once;
- `beyond`: shapes outside the targets (3 runs a night; tasks that cannot fall), for the record;
- `nightly`: stationary nightly suites, one run back to back with failing runs taking longer.

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
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.detection import backtest  # noqa: E402
from stream_app.core.config import CoreConfig  # noqa: E402

MODEL = "claude-sonnet-4-5"
START = datetime(2025, 1, 1, tzinfo=UTC)
PER = 200_000
"""False pages are reported per this many runs (the target: at most 1, every scope counted)."""
ORACLE_THRESHOLD = 2e6
NEVER = 10**9


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
    return json.dumps(doc, separators=(",", ":")).encode()


def regressed(p: float, odds: float) -> float:
    """The pass rate at `odds` times the odds of passing at `p`."""
    return p * odds / (1 - p + p * odds)


def likelihood_ratio(before: float, now: float, passed: bool) -> float:
    """A run's likelihood at pass rate `now` over that at `before` (1 when they are equal: a
    task at 0 or 1, or one that did not fall)."""
    if now == before:
        return 1.0
    return now / before if passed else (1 - now) / (1 - before)


class Oracle:
    """Shiryaev-Roberts over the runs that fell, with their true likelihood ratios, paging at
    ORACLE_THRESHOLD: what a detector knowing every pass rate and the change would do."""

    paged: int | None

    def __init__(self) -> None:
        self.r, self.runs, self.paged = 0.0, 0, None

    def step(self, before: float, now: float, passed: bool) -> None:
        self.runs += 1
        if self.paged is None:
            self.r = (1 + self.r) * likelihood_ratio(before, now, passed)
            if self.r >= ORACLE_THRESHOLD:
                self.paged = self.runs


class Page(NamedTuple):
    """A page as backtest reports it."""

    line: int
    scope: str
    experiment_id: str | None
    tier: str


def pages_of(lines: list[bytes]) -> list[Page]:
    report = backtest(iter(lines))
    return [Page(p["line"], p["scope"], p["experiment_id"], p["tier"]) for p in report["pages"]]


class Outcome(NamedTuple):
    """One simulated stream: runs before the change (every run when there is none) and the
    false pages (any page before the change, or after it on what did not fall: scope,
    detector's tier), the delay in runs that fell to the first page of the drop and its scope,
    the oracle's delay, and the runs fed."""

    before: int
    false_pages: list[str]
    delay: int | None
    scope: str | None
    oracle: int | None
    runs: int


def outcome(
    pages: list[Page],
    fell_lines: list[int],
    hit: Callable[[Page], bool],
    oracle: Oracle,
    total: int,
) -> Outcome:
    """Read a stream's pages: `fell_lines` are the lines of the runs that fell, in order."""
    change = fell_lines[0] if fell_lines else total + 1
    hits = [p for p in pages if p.line >= change and hit(p)]
    false = [f"{p.scope} {p.tier}" for p in pages if not (p.line >= change and hit(p))]
    delay, scope = None, None
    if hits:
        first = min(p.line for p in hits)
        scopes = {p.scope for p in hits if p.line == first}
        scope = "both" if len(scopes) > 1 else scopes.pop()
        delay = bisect.bisect_right(fell_lines, first)
    return Outcome(change - 1, false, delay, scope, oracle.paged, total)


# Harness shapes: subtests in blocks.

SUBTESTS = 24
SHAPES = ("blocked-10", "blocked-3", "epoch-major", "skips-reruns", "new-subtest")


def spread_rate(rnd: random.Random) -> float:
    """A pass rate spread like real evals' subtests: 15 % always fail, 30 % always pass, the
    rest Beta(4, 1)."""
    u = rnd.random()
    if u < 0.15:
        return 0.0
    if u < 0.45:
        return 1.0
    return rnd.betavariate(4, 1)


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


def shaped(shape: str, seed: int, runs: int, experiments: int = 4) -> Outcome:
    """`experiments` experiments of one suite (the model), tier T1, each `runs` runs in
    `shape`'s order, side by side a minute apart; the first experiment falls half-way (odds
    x0.33 on every subtest). Delay: its runs from the change to the first page on its tier or
    on the suite's."""
    streams = []
    for e in range(experiments):
        rnd = random.Random(seed * 1_000_003 + e)
        rates = [spread_rate(rnd) for _ in range(SUBTESTS + 1)]
        streams.append((rnd, rates, harness_order(shape, random.Random(rnd.random()), runs)))
    lines: list[bytes] = []
    fell: list[int] = []
    oracle = Oracle()
    for i in range(runs):
        for e, (rnd, rates, order) in enumerate(streams):
            subtest = next(order)
            p0 = rates[subtest]
            p = regressed(p0, 0.33) if e == 0 and i >= runs // 2 else p0
            passed = rnd.random() < p
            lines.append(
                event(
                    rnd,
                    run_id=f"{shape}-{seed}/exp-{e:02d}/{i:06d}",
                    experiment_id=f"exp-{e:02d}",
                    tier="T1",
                    subtest=f"{subtest:02d}",
                    passed=passed,
                    completed=START + timedelta(minutes=i, seconds=5 * e),
                )
            )
            if e == 0 and i >= runs // 2:
                fell.append(len(lines))
                oracle.step(p0, p, passed)

    def hit(page: Page) -> bool:
        return page.scope == "suite" or page.experiment_id == "exp-00"

    return outcome(pages_of(lines), fell, hit, oracle, len(lines))


# Nightly suites.


@dataclass(frozen=True)
class Nightly:
    """A nightly suite: `tasks` experiments, tiers T0 and T1, `runs` runs of each task and tier a
    night, two minutes apart from 01:00 UTC; base pass rates drawn by `rates`; the night's order
    `order` ("task": task by task, "shuffled": the tasks in a new order each night, "epoch":
    every task once, `runs` times over) with T1 first if `t1_first`; from night `change` (None:
    never) a `share` of the tasks' T1 passes at `odds` times the odds of its base rate."""

    nights: int
    tasks: int = 40
    runs: int = 5
    rates: str = "beta-7-3"
    change: int | None = None
    odds: float = 1.0
    share: float = 1.0
    order: str = "task"
    t1_first: bool = False
    fail_minutes: int = 2
    """How long a failing run takes; a passing one takes 2 minutes, and each run starts when the
    one before it ends."""

    def base_rate(self, rnd: random.Random) -> float:
        """A task's base pass rate."""
        kind = self.rates
        if kind == "beta-7-3":
            return rnd.betavariate(7, 3)
        if kind == "beta-2-1":
            return rnd.betavariate(2, 1)
        if kind == "uniform":
            return rnd.random()
        if kind == "clusters":  # 40 % near 0.45, 60 % near 0.9
            return rnd.betavariate(9, 11) if rnd.random() < 0.4 else rnd.betavariate(18, 2)
        if kind == "near-0-1":  # 15 % near 0, 30 % near 1, the rest Beta(4, 1)
            u = rnd.random()
            if u < 0.15:
                return rnd.betavariate(1, 30)
            return rnd.betavariate(30, 1) if u < 0.45 else rnd.betavariate(4, 1)
        if kind == "beta-3-3":
            return rnd.betavariate(3, 3)
        if kind == "half-near-0-1":  # a quarter near 0, a quarter near 1, the rest uniform
            u = rnd.random()
            if u < 0.25:
                return rnd.betavariate(1, 20)
            return rnd.betavariate(20, 1) if u < 0.5 else rnd.random()
        if kind == "beta-half":  # U-shaped: most tasks near 0 or 1
            return rnd.betavariate(0.5, 0.5)
        if kind == "zero-one":
            return spread_rate(rnd)
        raise ValueError(f"unknown base rates {kind!r}")

    def night(self, rnd: random.Random) -> list[tuple[int, str]]:
        """(task, tier) of each run of a night, in order."""
        tasks = list(range(self.tasks))
        if self.order == "shuffled":
            rnd.shuffle(tasks)
        tiers = ("T1", "T0") if self.t1_first else ("T0", "T1")
        if self.order == "epoch":
            return [(t, tier) for _ in range(self.runs) for t in tasks for tier in tiers]
        return [(t, tier) for t in tasks for tier in tiers for _ in range(self.runs)]


def nightly(seed: int, shape: Nightly) -> Outcome:
    """One nightly suite (suite: the model) through backtest, the oracle beside it on the same
    runs. Delay: T1 runs of the suite from the first after the change to the first page on the
    suite's T1 or on a fallen task's T1 (either scope)."""
    rnd = random.Random(seed)
    base = [shape.base_rate(rnd) for _ in range(shape.tasks)]
    fell = set(range(shape.tasks))
    if shape.share < 1:
        fell = set(rnd.sample(range(shape.tasks), round(shape.share * shape.tasks)))
    lines: list[bytes] = []
    fell_lines: list[int] = []
    oracle = Oracle()
    counts: dict[tuple[int, str], int] = {}
    for night in range(shape.nights):
        dropped = shape.change is not None and night >= shape.change
        at = START + timedelta(days=night, hours=1)
        for task, tier in shape.night(rnd):
            p0 = base[task]
            p = regressed(p0, shape.odds) if dropped and tier == "T1" and task in fell else p0
            passed = rnd.random() < p
            j = counts[(task, tier)] = counts.get((task, tier), 0) + 1
            lines.append(
                event(
                    rnd,
                    run_id=f"s{seed}/task-{task:02d}/{tier}/{j:05d}",
                    experiment_id=f"task-{task:02d}",
                    tier=tier,
                    subtest="00",
                    passed=passed,
                    completed=at,
                )
            )
            at += timedelta(minutes=2 if passed else shape.fail_minutes)
            if dropped and tier == "T1":
                fell_lines.append(len(lines))
                oracle.step(p0, p, passed)

    def hit(page: Page) -> bool:
        if page.tier != "T1":
            return False
        return page.scope == "suite" or int((page.experiment_id or "task-0").split("-")[1]) in fell

    return outcome(pages_of(lines), fell_lines, hit, oracle, len(lines))


# Sizes.


@dataclass(frozen=True)
class Sizes:
    """How much of each section runs."""

    shape_streams: int
    shape_runs: int
    suites: int
    """Nightly suites a detection row."""
    stationary_suites: int


FULL = Sizes(shape_streams=20, shape_runs=6_000, suites=20, stationary_suites=6)
QUICK = Sizes(shape_streams=2, shape_runs=3_000, suites=3, stationary_suites=1)


# Tables.

Job = tuple[Callable[..., Outcome], tuple[Any, ...]]


def _call(job: Job) -> Outcome:
    fn, args = job
    return fn(*args)


def _cost(job: Job) -> float:
    """A job's rough cost (runs fed), to start the longest first."""
    fn, args = job
    if fn is nightly:
        shape: Nightly = args[1]
        return float(shape.nights * shape.runs * shape.tasks * 2)
    return float(args[2] * 4)


def _per(pages: int, runs: int) -> str:
    return f"{pages / runs * PER:.2f}" if runs else "-"


def _text(value: float) -> str:
    return "never" if value >= NEVER else f"{value:g}"


def summarise(delays: Sequence[int | None], within: int) -> tuple[int, float, float]:
    """(streams paged within `within` runs, median delay, 90th percentile), a stream not paged
    within it counted as never."""
    ordered = sorted(d if d is not None and d <= within else NEVER for d in delays)
    paged = sum(1 for d in ordered if d < NEVER)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return paged, _middle(ordered), p90


def _middle(ordered: Sequence[float]) -> float:
    """The median of sorted delays, never when either middle one is never."""
    if ordered[len(ordered) // 2] >= NEVER:
        return NEVER
    return statistics.median(ordered)


def _median(values: Sequence[int | None]) -> str:
    return _text(_middle(sorted(v if v is not None else NEVER for v in values)))


class Row(NamedTuple):
    """A detection row: its name, the job making one stream, its limit and targets (None: no
    target, reported for the record)."""

    name: str
    make: Callable[[int], Job]
    within: int
    paged_target: int | None
    median_target: int | None


class Section(NamedTuple):
    """A section's rows, streams a row, and title; `stationary`: no change in its streams."""

    title: str
    rows: list[Row]
    streams: int
    stationary: bool = False

    def jobs(self) -> list[Job]:
        return [row.make(k) for row in self.rows for k in range(self.streams)]

    def render(self, results: list[Outcome]) -> str:
        if self.stationary:
            return self._render_stationary(results)
        lines = [
            self.title,
            "",
            "| scenario | paged within | target | median delay | target | 90th pct | oracle "
            "median | first scope (exp/suite/both) | false pages | runs before the change |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        n = self.streams
        for r, row in enumerate(self.rows):
            mine = results[r * n : (r + 1) * n]
            paged, median, p90 = summarise([o.delay for o in mine], row.within)
            verdict = ""
            paged_target = median_target = "-"
            if row.paged_target is not None:
                scaled = round(row.paged_target * n / 20)
                paged_target = f">= {scaled}/{n}"
                ok = paged >= scaled and (row.median_target is None or median <= row.median_target)
                verdict = " ok" if ok else " MISSED"
                if row.median_target is not None:
                    median_target = f"<= {row.median_target}"
            scopes = [o.scope for o in mine]
            first = "/".join(str(scopes.count(s)) for s in ("experiment", "suite", "both"))
            false = sum(len(o.false_pages) for o in mine)
            lines.append(
                f"| {row.name} | {paged}/{n} in {row.within:,} runs | {paged_target} | "
                f"{_text(median)} | {median_target}{verdict} | {_text(p90)} | "
                f"{_median([o.oracle for o in mine])} | {first} | {false} | "
                f"{sum(o.before for o in mine):,} |"
            )
        return "\n".join(lines)

    def _render_stationary(self, results: list[Outcome]) -> str:
        lines = [
            self.title,
            "",
            f"| scenario | runs | experiment pages | suite pages | pages per {PER:,} runs |",
            "|---|---|---|---|---|",
        ]
        n = self.streams
        for r, row in enumerate(self.rows):
            mine = results[r * n : (r + 1) * n]
            runs = sum(o.before for o in mine)
            scopes = [p.split()[0] for o in mine for p in o.false_pages]
            lines.append(
                f"| {row.name} | {runs:,} | {scopes.count('experiment')} | "
                f"{scopes.count('suite')} | {_per(len(scopes), runs)} |"
            )
        return "\n".join(lines)


def nightly_row(
    name: str, shape: Nightly, seed: int, within: int, targets: tuple[int | None, int | None]
) -> Row:
    return Row(name, lambda k: (nightly, (seed + k, shape)), within, *targets)


ALL = Nightly(nights=23, change=20, odds=0.33)
"""The issue's nightly suite, regressing on every task: 3 nights from the change."""
QUARTER = Nightly(nights=32, change=20, odds=0.2, share=0.25)
"""A quarter of its tasks regressing: 12 nights from the change (2,000 T1 runs is 10)."""
ALL_TARGET, QUARTER_TARGET = (19, 200), (16, None)


def tuned() -> list[Row]:
    """The rows the design was tried on (seeds 1000+, 2000+)."""
    return [
        nightly_row("every task x0.33", ALL, 1000, 400, ALL_TARGET),
        nightly_row("a quarter x0.2", QUARTER, 2000, 2000, QUARTER_TARGET),
    ]


HELD_OUT: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "base rates Beta(2, 1), drop on night 12 (young histories)",
        {"rates": "beta-2-1", "change": 12},
    ),
    (
        "uniform base rates, tasks shuffled each night, night 30",
        {"rates": "uniform", "change": 30, "order": "shuffled"},
    ),
    (
        "two clusters (0.45, 0.9), epoch-major nights, T1 first",
        {"rates": "clusters", "order": "epoch", "t1_first": True},
    ),
    ("near 0/1 (15 % ~3 %, 30 % ~97 %, rest Beta(4, 1))", {"rates": "near-0-1"}),
)


def _moved(shape: Nightly, changes: dict[str, Any]) -> Nightly:
    """`shape` with `changes`, its nights moved with its change."""
    new = replace(shape, **changes)
    assert shape.change is not None
    assert new.change is not None
    return replace(new, nights=shape.nights - shape.change + new.change)


def held_out() -> list[Row]:
    """The targets on shapes not tuned on (seeds 5000+)."""
    return held_out_rows(HELD_OUT, 5000)


FRESH: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "Beta(3, 3) base rates, drop on night 8, epoch-major nights",
        {"rates": "beta-3-3", "change": 8, "order": "epoch"},
    ),
    (
        "half near 0/1 (25 % ~5 %, 25 % ~95 %, rest uniform), shuffled, night 25",
        {"rates": "half-near-0-1", "change": 25, "order": "shuffled"},
    ),
    (
        "U-shaped Beta(0.5, 0.5) base rates, T1 first, night 16",
        {"rates": "beta-half", "change": 16, "t1_first": True},
    ),
)
"""Held out a second time: written after the change points came to weigh their runs (the change
made after the near-0/1 row of HELD_OUT missed), and run once, as they are."""


def held_out_rows(shapes: Sequence[tuple[str, dict[str, Any]]], seed: int) -> list[Row]:
    """Each shape's two targets (seeds `seed` + 200 a shape, + 100 for a quarter)."""
    rows = []
    for i, (label, changes) in enumerate(shapes):
        every, quarter = _moved(ALL, changes), _moved(QUARTER, changes)
        at = seed + 200 * i
        rows.append(nightly_row(f"{label}: every task x0.33", every, at, 400, ALL_TARGET))
        rows.append(
            nightly_row(f"{label}: a quarter x0.2", quarter, at + 100, 2000, QUARTER_TARGET)
        )
    return rows


def beyond() -> list[Row]:
    """Outside the targets, for the record (seeds 8000+)."""
    three = {"runs": 3, "rates": "beta-2-1", "change": 12}
    zero_one = {"rates": "zero-one"}
    return [
        nightly_row(
            "3 runs a night, Beta(2, 1), night 12: every task x0.33",
            replace(_moved(ALL, three), nights=17),
            8000,
            400,
            (None, None),
        ),
        nightly_row(
            "3 runs a night, Beta(2, 1), night 12: a quarter x0.2",
            replace(_moved(QUARTER, three), nights=32),
            8100,
            2000,
            (None, None),
        ),
        nightly_row(
            "0/1 mix (45 % of tasks at 0 or 1 cannot fall): every task x0.33",
            _moved(ALL, zero_one),
            8200,
            400,
            (None, None),
        ),
        nightly_row("0/1 mix: a quarter x0.2", _moved(QUARTER, zero_one), 8300, 2000, (None, None)),
    ]


def shape_rows(sizes: Sizes) -> list[Row]:
    """Each harness shape with its first experiment falling half-way (seeds 100+)."""
    return [
        Row(
            shape,
            cast(
                Callable[[int], Job],
                lambda k, s=s, shape=shape: (shaped, (shape, 100 + 100 * s + k, sizes.shape_runs)),
            ),
            1500,
            None,
            None,
        )
        for s, shape in enumerate(SHAPES)
    ]


def stationary_rows() -> list[Row]:
    """Stationary nightly suites, 60 nights, tasks shuffled each night (seeds 700+)."""
    return [
        nightly_row(
            "nightly, Beta(7, 3)", Nightly(nights=60, order="shuffled"), 700, 0, (None, None)
        ),
        nightly_row(
            "nightly, Beta(2, 1)", Nightly(nights=60, rates="beta-2-1"), 750, 0, (None, None)
        ),
        nightly_row(
            "nightly, Beta(7, 3), a failing run taking 3 times a passing one's 2 minutes",
            Nightly(nights=60, fail_minutes=6),
            800,
            0,
            (None, None),
        ),
    ]


def sections(sizes: Sizes) -> dict[str, Section]:
    """Every section at `sizes`."""
    return {
        "shapes": Section(
            f"Harness shapes, {sizes.shape_streams} stream(s) a row: 4 experiments of one suite side "
            f"by side a minute apart, tier T1, {sizes.shape_runs:,} runs each, 24 subtests a "
            "tier (15 % always fail, 30 % always pass, the rest Beta(4, 1)) in the shape's order; "
            "the first experiment's tier falls half-way (odds x0.33 on every subtest: subtests "
            "at 0 or 1 cannot fall). Delay: its runs from the change to the first page on its "
            "tier or the suite's; oracle: Shiryaev-Roberts over its runs from the change with "
            "the true likelihood ratios, threshold 2e6. False pages: any page before the change, "
            "or after it on another experiment:",
            shape_rows(sizes),
            sizes.shape_streams,
        ),
        "tuned": Section(
            f"Tuned on: nightly suites of 40 tasks x T0/T1, 5 runs a task and tier a night, base "
            f"rates Beta(7, 3); T1 falls on night 20; {sizes.suites} suite(s) a row (targets "
            "scaled from 20). Delay: T1 runs of the suite from the first after the change to the "
            "first page on the suite's T1 or a fallen task's T1 (either scope); oracle as above "
            "over the suite's T1 runs. False pages: before the change, on T0, or on a task that "
            "did not fall:",
            tuned(),
            sizes.suites,
        ),
        "heldout": Section(
            f"Held out (not tuned on): the same targets, 40 tasks, 5 runs a task and tier a night, "
            f"other base rates, drop nights and orders; {sizes.suites} suite(s) a row, columns as "
            "above:",
            held_out(),
            sizes.suites,
        ),
        "fresh": Section(
            f"Held out a second time (written after the last change to the design, run once): "
            f"the same targets, 40 tasks, 5 runs a task and tier a night; {sizes.suites} "
            "suite(s) a row, columns as above:",
            held_out_rows(FRESH, 9000),
            sizes.suites,
        ),
        "beyond": Section(
            f"Beyond the targets, for the record: 3 runs a night, and a mix where 45 % of the "
            f"tasks pass always or never (the odds of passing cannot change there, so only the "
            f"rest can fall); {sizes.suites} suite(s) a row:",
            beyond(),
            sizes.suites,
        ),
        "nightly": Section(
            f"Stationary nightly suites, 60 nights, 40 tasks x T0/T1, 5 runs a task and tier a "
            f"night; {sizes.stationary_suites} suite(s) a row. Every page is false:",
            stationary_rows(),
            sizes.stationary_suites,
            stationary=True,
        ),
    }


def main(argv: list[str]) -> int:
    """Print the sections asked for."""
    names = ("shapes", "tuned", "heldout", "fresh", "beyond", "nightly")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer streams a row")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--only", default=",".join(names), help="comma-separated sections")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    design = CoreConfig().drop_design
    print(
        "Harness-shaped traffic through `stream-app backtest --json -`: pages of both scopes "
        "(experiment tiers and suite tiers).\n"
        f"Command: .venv/bin/python -m bench.harness{' --quick' if args.quick else ''}\n"
        f"Design: drop_false_page_runs={design.false_page_runs:,.0f}, "
        f"drop_smallest_fall={design.smallest_fall}, drop_warmup_runs={design.warmup_runs}, "
        f"drop_reference_runs={design.reference_runs}, drop_reference_z={design.reference_z}. "
        f"Targets: at most 1 false page per {PER:,} runs, every scope counted; the nightly "
        "suite regressing on every task paged within 400 T1 runs in 19 of 20 suites, median "
        "<= 200; a quarter of its tasks regressing paged within 2,000 in 16 of 20.\n",
        flush=True,
    )
    chosen = [(name, sections(sizes)[name]) for name in args.only.split(",")]
    began = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures: dict[int, Future[Outcome]] = {}
        jobs = [(i, job) for i, job in enumerate(j for _, s in chosen for j in s.jobs())]
        for i, job in sorted(jobs, key=lambda ij: -_cost(ij[1])):  # the longest first
            futures[i] = pool.submit(_call, job)
        done, runs, pages = 0, 0, 0
        try:
            for _, section in chosen:
                count = len(section.rows) * section.streams
                results = [futures[done + k].result() for k in range(count)]
                done += count
                print(section.render(results), end="\n\n", flush=True)
                runs += sum(o.before for o in results)
                pages += sum(len(o.false_pages) for o in results)
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    print(
        f"Every run before a change above, and every stationary run: {runs:,} runs, {pages} "
        f"false page(s) of either scope in all, {_per(pages, runs)} per {PER:,} runs (target: "
        "at most 1).",
        flush=True,
    )
    print(f"took {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
