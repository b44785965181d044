"""Everything evalstream keeps for one `(experiment_id, tier)`: its window, the grade of its
last full window (to detect grade changes), its counts since its first run (`core.totals`) and its
drop detectors (`core.drop_detector`). Pure; the worker stores it in a Faust table and replay
keeps it in a dict, and both step it with `apply`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from schemas.aggregates import TierAggregate
from schemas.common import GRADES, DropDetector, Grade
from schemas.grade_change import GradeChange
from schemas.timestamp import MAX_UTC, MIN_UTC
from stream_app.core.aggregation import aggregate_window
from stream_app.core.compact_json import dumps
from stream_app.core.config import CoreConfig
from stream_app.core.drop_detector import (
    MAX_STRATA,
    MAX_STRATA_NAME_BYTES,
    MAX_STRATUM_CHARS,
    DropDesign,
    DropState,
    odds_ratios,
)
from stream_app.core.keyed_batch import FoldedBatch, KeyedFold
from stream_app.core.keys import split_tier_key
from stream_app.core.suite.evidence import MAX_FEED_BYTES, TierFeed
from stream_app.core.suite.message import SuiteRun
from stream_app.core.totals import Totals
from stream_app.core.window import (
    STORED_FIELDS,
    AddOutcome,
    TierWindow,
    WindowEntry,
    from_epoch_us,
    to_epoch_us,
)
from stream_app.metrics.grades import assign_letter_grade, grade_points
from stream_app.metrics.statistics import median

STATE_VERSION: Final = 2
"""The only version read: no release wrote another, nor version 2's earlier records (one drop
reference, window rows of 8 to 10 fields, no suite feed): docs/architecture.md, 'Stored
formats'."""
_LEARNS: Final = WindowEntry._fields.index("learns")
MAX_ROW_BYTES: Final = 2700
"""The most one run takes in a stored window or an aggregate: a 200-character run id and
subtest written as JSON (six bytes a character at worst, for control characters), its numbers."""
MAX_STRATA_BYTES: Final = MAX_STRATA_NAME_BYTES + MAX_STRATA * 120 + MAX_FEED_BYTES
"""The most a tier's stored strata take: their names and MAX_STRATA references' sums, and its
suite feed (each subtest's history, the suites)."""


@dataclass(frozen=True, slots=True)
class Step:
    """What one run did to its tier: the outcome, and for an added run the new aggregate, the
    change when the full window's grade moved, the detector that paged on it, and the run's
    share of its suite (to forward to the suite hop)."""

    outcome: AddOutcome
    aggregate: TierAggregate | None = None
    grade_change: GradeChange | None = None
    page: DropDetector | None = None
    suite_run: SuiteRun | None = None
    suite: str = ""


class TierState:
    """One tier's window and the grade of its last full window: what a grade change needs; its
    totals and drop detectors (`drop`, what TierDropped pages on), stepped by every accepted run;
    what it feeds its suites (`feed`); and when the worker last accepted a run into it
    (`touched_us`, for retirement)."""

    __slots__ = (
        "drop",
        "experiment_id",
        "feed",
        "last_full_grade",
        "tier",
        "totals",
        "touched_us",
        "window",
    )

    def __init__(
        self,
        experiment_id: str,
        tier: str,
        window: TierWindow,
        last_full_grade: Grade | None,
        touched_us: int | None = None,
        *,
        totals: Totals | None = None,
        drop: DropState | None = None,
        feed: TierFeed | None = None,
    ) -> None:
        self.experiment_id = experiment_id
        self.tier = tier
        self.window = window
        """The last `window_size` runs, in window order."""
        self.last_full_grade = last_full_grade
        self.touched_us = touched_us
        """Processing time (µs since the epoch) of the last accepted run; None: unknown (a
        state stored before it was kept, which counts as touched when it is loaded)."""
        self.totals = totals or Totals()
        """Counts of every accepted run since the tier's first."""
        self.drop = drop or DropState()
        """The drop detectors' state, stepped by every accepted run (`core.drop_detector`)."""
        self.feed = feed or TierFeed()
        """Each subtest's whole history, for its runs' suite evidence (`core.suite.evidence`)."""

    @classmethod
    def empty(cls, experiment_id: str, tier: str, capacity: int) -> TierState:
        """The state of a tier that has seen no run."""
        return cls(experiment_id, tier, TierWindow(capacity), None)

    def apply(self, entry: WindowEntry, config: CoreConfig, with_aggregate: bool = True) -> Step:
        """Add a run; duplicates and late runs change nothing. The worker applies a batch with
        `with_aggregate=False` and aggregates once per key at its end: grade changes only need the
        median composite, computed here for every run. Atomic: when it raises, the state is as
        it was before the call."""
        learns = self.drop.learns(entry.stratum, config.drop_design)
        if learns is not entry.learns:  # `_replace`, without its per-field calls
            entry = WindowEntry._make((*entry[:_LEARNS], learns, *entry[_LEARNS + 1 :]))
        outcome, evicted = self.window.insert(entry)
        if outcome is not AddOutcome.ADDED:
            return Step(outcome)
        try:
            return self._after_add(entry, evicted, config, with_aggregate)
        except BaseException:
            self.window.undo(entry, evicted)
            raise

    def _after_add(
        self,
        entry: WindowEntry,
        evicted: WindowEntry | None,
        config: CoreConfig,
        with_aggregate: bool,
    ) -> Step:
        change = None
        grade = self.last_full_grade
        if self.window.is_full:
            entries = self.window.entries
            composite_median = median([e.composite_score for e in entries])
            grade = assign_letter_grade(composite_median, config.grade_thresholds)
            previous = self.last_full_grade
            if previous is not None and previous != grade:
                change = GradeChange(
                    experiment_id=self.experiment_id,
                    tier=self.tier,
                    previous_grade=previous,
                    grade=grade,
                    direction="drop" if grade_points(grade) < grade_points(previous) else "rise",
                    composite_median=composite_median,
                    at=from_epoch_us(entries[-1].completed_at_us),
                    run_id=entry.run_id,
                )
        design = config.drop_design
        drop, page = self.drop.observe_run(entry.pass_rate, entry.impl_rate, entry.stratum, design)
        if evicted is not None and evicted.learns and drop.strata is self.drop.strata:
            # a run joins its stratum's reference once it has left the window: a drop's first
            # window of runs is measured against a reference none of them is in
            drop = drop.learn(evicted.stratum, evicted.pass_rate, evicted.impl_rate, design)
        feed, evidence = self.feed.observe(entry, odds_ratios(design))
        before = self.totals, self.drop, self.feed
        self.totals, self.drop, self.feed = self.totals.add(entry), drop, feed
        suite_run = None
        if entry.suite in feed.suites:  # not for a run of a suite beyond the MAX_SUITES a tier
            # remembers (none could retire this experiment from it), nor one without a suite
            suite_run = SuiteRun(
                self.experiment_id,
                feed.epoch,
                self.totals.runs,
                entry.completed_at_us,
                evidence,
                entry.pass_rate == 1.0,
                entry.composite_score,
            )
        try:
            aggregate = self.aggregate(config) if with_aggregate else None
        except BaseException:
            self.totals, self.drop, self.feed = before
            raise
        self.last_full_grade = grade  # last: nothing after it can raise
        return Step(AddOutcome.ADDED, aggregate, change, page, suite_run, entry.suite)

    def copy(self) -> TierState:
        """An independent copy, so that a batch can go back to the state before it."""
        return TierState(
            self.experiment_id,
            self.tier,
            self.window.copy(),
            self.last_full_grade,
            self.touched_us,
            totals=self.totals,
            drop=self.drop,
            feed=self.feed,
        )

    def aggregate(self, config: CoreConfig) -> TierAggregate:
        """The aggregate of the current window (it must hold a run), with the tier's totals and
        drop status."""
        return aggregate_window(
            self.experiment_id, self.tier, self.window, config, totals=self.totals, drop=self.drop
        )

    def to_json(self) -> bytes:
        """Serialized for the table's changelog (infinite costs as the `Infinity` literal)."""
        state: dict[str, Any] = {
            "v": STATE_VERSION,
            "window": self.window.to_state(),
            "grade": self.last_full_grade,
        }
        if self.touched_us is not None:
            state["at"] = self.touched_us
        state["totals"] = self.totals.to_state()
        state["detect"] = self.drop.to_state()
        state["feed"] = self.feed.to_state()
        return dumps(state)  # a run id of emoji writes as 4 bytes a character, not 12

    @classmethod
    def from_json(
        cls,
        experiment_id: str,
        tier: str,
        capacity: int,
        raw: bytes,
        design: DropDesign | None = None,
    ) -> TierState:
        """Load a stored state; raises ValueError (never anything later) when it is not one
        (with `design`, also when its drop detectors are where no run under it leaves them)."""
        try:
            data: Any = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"tier state is not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("v") != STATE_VERSION:
            raise ValueError(f"not a tier state of version {STATE_VERSION}")
        rows, grade, touched = data.get("window"), data.get("grade"), data.get("at")
        if not isinstance(rows, list) or grade not in (None, *GRADES):
            raise ValueError("tier state has no window list or a bad grade")
        if touched is not None and not (_timestamp(touched)):
            raise ValueError("tier state has a bad touched time")
        try:
            window = TierWindow.from_state(capacity, [_checked_row(row) for row in rows])
        except OverflowError as exc:  # an integer too large for a float
            raise ValueError(f"tier state row has a value out of range: {exc}") from None
        if "totals" not in data or "detect" not in data or "feed" not in data:
            raise ValueError("tier state has no totals, drop state or suite feed")
        totals = Totals.from_state(data["totals"])
        drop = DropState.from_state(data["detect"], design)
        feed = TierFeed.from_state(data["feed"])
        histories = sum(h.runs for h in feed.subtests.values())  # ints
        if not len(window) <= totals.runs >= max(drop.reference.runs, histories):
            raise ValueError(
                "tier state has fewer runs in its totals than in its window, its drop reference "
                "or its suite feed"
            )
        return cls(experiment_id, tier, window, grade, touched, totals=totals, drop=drop, feed=feed)


def touched_of(record: Any) -> int | None:
    """When a decoded stored state was last touched, if it says so validly."""
    touched = record.get("at") if isinstance(record, dict) else None
    return touched if _timestamp(touched) else None


def suites_fed(raw: bytes) -> tuple[str, ...]:
    """The suites a stored tier state's runs went to, read without loading the whole state (at
    retirement, for thousands of tiers at once); () when it says none or cannot be read."""
    try:
        feed = json.loads(raw)["feed"]
        suites = TierFeed.from_state(feed).suites
    except Exception:
        return ()
    return suites


_MIN_US: Final = to_epoch_us(MIN_UTC)
_MAX_US: Final = to_epoch_us(MAX_UTC)


def _number(value: Any) -> bool:
    """Every metric of a run is a number >= 0 (cost of pass may be +inf); never NaN."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _timestamp(value: Any) -> bool:
    """µs since the epoch within the contract's range of timestamps."""
    return isinstance(value, int) and not isinstance(value, bool) and _MIN_US <= value < _MAX_US


def _checked_row(row: Any) -> list[Any]:
    """A stored window row, checked field by field: a state that loads can be aggregated."""
    if not isinstance(row, list) or len(row) != STORED_FIELDS:
        raise ValueError(f"tier state row is not a list of {STORED_FIELDS} fields")
    at, run_id, *values = row[:10]
    stratum, learns = row[10:]
    if not isinstance(stratum, str) or len(stratum) > MAX_STRATUM_CHARS:
        raise ValueError("tier state row has a bad stratum")
    if not isinstance(learns, bool):
        raise ValueError("tier state row has a bad learns flag")
    if not _timestamp(at):
        raise ValueError("tier state row has a bad completed_at")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError("tier state row has a bad run_id")
    required = (values[0], values[1], values[3], values[5])  # rates, duration, composite
    optional = (values[2], values[4], *values[6:])  # the costs (unpriced) and code metrics
    if not all(_number(v) for v in required) or not all(v is None or _number(v) for v in optional):
        raise ValueError("tier state row has a value that is not a number")
    numbers = [float(v) if v is not None else None for v in values]
    return [at, run_id, *numbers, stratum, learns]


def fold_runs(
    runs: Sequence[tuple[str, WindowEntry]],
    load: Callable[[str], TierState | None],
    config: CoreConfig,
) -> FoldedBatch[str, TierState, Step, TierAggregate]:
    """A batch of runs (tier key, entry) into their tiers' windows, each changed tier aggregated
    once; an exception costs only the run that raised it (see `keyed_batch`). The one fold of
    the worker's window stage and of `replay`."""

    def fresh(key: str) -> TierState:
        return TierState.empty(*split_tier_key(key), config.window_size)

    def step(state: TierState, entry: WindowEntry) -> tuple[bool, Step]:
        result = state.apply(entry, config, with_aggregate=False)
        return result.outcome is AddOutcome.ADDED, result

    def finish(key: str, state: TierState) -> TierAggregate:
        return state.aggregate(config)

    return KeyedFold(load, fresh, TierState.copy, step, finish).run(runs)
