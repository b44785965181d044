"""Has the agent got worse across its suite? The drop detectors of one `(suite, tier)`, pooled
over the suite's experiments. A suite's runs come from many input partitions in an order no
replay reproduces, so its state is a function of the *set* of runs it was given: each run's
evidence (`drop_detector.Contribution`, computed by its own tier) is summed in fixed point per
event-time bucket, and the statistics are computed from the buckets in their time order. Why
and how: docs/statistics.md, 'Suites'; docs/architecture.md, 'The suite hop'."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from schemas.suites import SuiteDrop, SuiteTier
from stream_app.core.drop_detector import (
    DETECTORS,
    FALLS,
    LOG_UNIT,
    Contribution,
    Detector,
    DropDesign,
)
from stream_app.core.keyed_batch import FoldedBatch, KeyedFold
from stream_app.core.keys import split_tier_key

HOUR_US: Final = 3_600_000_000
HOURS: Final = 168
"""The pooled detector's window: change points on each of the last 168 hours (a week)."""
DAYS: Final = 7
"""The sparse detector's window: change points on each of the last 7 days."""
POOLED_SHARE: Final = 0.75
"""The false-page budget's share of the pooled detector (every experiment fell); the sparse one
(some experiments fell) has the rest."""
SPARSE_PI: Final = 0.25
"""The share of experiments the sparse detector bets have fallen (Xie & Siegmund 2013)."""
MIN_EXPERIMENTS: Final = 2
"""Experiments with runs in the window a suite needs to page: one is its own tier's business."""
_SIZE: Final = len(DETECTORS) * len(FALLS)
_MAX_LOG: Final = 700.0
_MAX_UNITS: Final = 1000 * LOG_UNIT
"""No run's log evidence is as large as 1000 nats: a message claiming more is not a run's."""


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """One accepted run's share of its suite: where it goes, its place in its tier (`seq`, the
    tier's accepted runs counting it: a repeat is dropped), when, and its evidence."""

    suite: str
    tier: str
    experiment_id: str
    seq: int
    completed_at_us: int
    contribution: Contribution

    def to_json(self) -> bytes:
        """The message the windows hop forwards to the suite hop."""
        return json.dumps(
            [
                self.suite,
                self.tier,
                self.experiment_id,
                self.seq,
                self.completed_at_us,
                list(self.contribution),
            ],
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> SuiteRun:
        """`to_json`'s message; raises ValueError (or TypeError) when it is not one."""
        suite, tier, experiment_id, seq, at, contribution = json.loads(raw)
        if not all(isinstance(v, str) and v for v in (suite, tier, experiment_id)):
            raise ValueError("a suite run needs its suite, tier and experiment")
        if not _count(seq, 2**63) or not _count(at, 2**63):
            raise ValueError("a suite run needs a sequence and a time that are integers >= 0")
        if not isinstance(contribution, list) or len(contribution) != _SIZE:
            raise ValueError(f"a suite run needs {_SIZE} pieces of evidence")
        if not all(_integer(v) and abs(v) <= _MAX_UNITS for v in contribution):
            raise ValueError("a suite run's evidence is not integers in range")
        return cls(suite, tier, experiment_id, seq, at, tuple(contribution))


@dataclass(frozen=True, slots=True)
class SuiteStatus:
    """What a suite's detectors show now: each detector's evidence ratio (log(1 + R) / log(1 +
    threshold), the larger of the pooled and sparse detectors), and whether a page is in
    effect (a threshold reached within the windows)."""

    dropped: bool
    evidence: dict[Detector, float]
    experiments: int
    runs: int


@dataclass(slots=True)
class SuiteState:
    """One `(suite, tier)`: the last run `seq` of each experiment (repeats are dropped), the
    pooled evidence per hour, each experiment's evidence per day, and the runs counted."""

    seen: dict[str, int] = field(default_factory=dict)
    hours: dict[int, list[int]] = field(default_factory=dict)
    days: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    runs: int = 0
    top_hour: int | None = None

    def add(self, run: SuiteRun) -> bool:
        """Count one run; False for a repeat (a `seq` its experiment has had). Commutes with
        every other experiment's runs: buckets more than the windows behind the newest are
        dropped, and so are runs for them, whichever came first."""
        if run.seq <= self.seen.get(run.experiment_id, 0):
            return False
        self.seen[run.experiment_id] = run.seq
        self.runs += 1
        hour = run.completed_at_us // HOUR_US
        if self.top_hour is None or hour > self.top_hour:
            self.top_hour = hour
            self._prune()
        if hour <= self.top_hour - HOURS:
            return True
        _accumulate(self.hours.setdefault(hour, [0] * _SIZE), run.contribution)
        if hour // 24 > self.top_hour // 24 - DAYS:
            days = self.days.setdefault(run.experiment_id, {})
            _accumulate(days.setdefault(hour // 24, [0] * _SIZE), run.contribution)
        return True

    def _prune(self) -> None:
        assert self.top_hour is not None
        first_hour, first_day = self.top_hour - HOURS + 1, self.top_hour // 24 - DAYS + 1
        self.hours = {h: v for h, v in self.hours.items() if h >= first_hour}
        days = {e: {d: v for d, v in b.items() if d >= first_day} for e, b in self.days.items()}
        self.days = {e: b for e, b in days.items() if b}

    def remove(self, experiment_id: str) -> None:
        """Retire an experiment: its sequence and its own evidence go (its share of the pooled
        hours leaves with their window)."""
        self.seen.pop(experiment_id, None)
        self.days.pop(experiment_id, None)

    def status(self, design: DropDesign) -> SuiteStatus:
        """The detectors now, and whether a page is in effect."""
        pooled_threshold = design.threshold / POOLED_SHARE
        sparse_threshold = design.threshold / (1 - POOLED_SHARE)
        pooled = self._pooled(pooled_threshold / _weight())
        sparse = self._sparse(sparse_threshold / _weight())
        # a suite of one experiment is that experiment, watched by its tier's detectors
        dropped = len(self.days) >= MIN_EXPERIMENTS and any(
            max(pooled[d]) >= pooled_threshold or max(sparse[d]) >= sparse_threshold
            for d in range(len(DETECTORS))
        )
        evidence = {
            detector: round(
                max(
                    _ratio(pooled[d][-1], pooled_threshold),
                    _ratio(sparse[d][-1], sparse_threshold),
                ),
                6,
            )
            for d, detector in enumerate(DETECTORS)
        }
        return SuiteStatus(dropped, evidence, len(self.seen), self.runs)

    def _pooled(self, cap: float) -> list[list[float]]:
        """Each detector's pooled mixture at the end of every hour with runs, in time order:
        Shiryaev-Roberts over the hours, R <- (1 + R) exp(the hour's log evidence)."""
        r = [0.0] * _SIZE
        out: list[list[float]] = [[0.0] for _ in DETECTORS]
        for hour in sorted(self.hours):
            logs = self.hours[hour]
            r = [min((1.0 + r[i]) * _exp(logs[i]), cap) for i in range(_SIZE)]
            for d in range(len(DETECTORS)):
                out[d].append(_mix(r, d))
        return out

    def _sparse(self, cap: float) -> list[list[float]]:
        """Each detector's sparse mixture at the end of every day with runs: for each change
        day j, the product over experiments of (1 - pi + pi * their evidence since j), summed
        over j."""
        days = sorted({d for b in self.days.values() for d in b})
        out: list[list[float]] = [[0.0] for _ in DETECTORS]
        for t, end in enumerate(days):
            r = [0.0] * _SIZE
            for start in days[: t + 1]:
                logs = [0.0] * _SIZE
                for experiment in sorted(self.days):
                    since = [0] * _SIZE
                    for day, values in self.days[experiment].items():
                        if start <= day <= end:
                            _accumulate(since, values)
                    for i in range(_SIZE):
                        logs[i] += math.log(1 - SPARSE_PI + SPARSE_PI * _exp(since[i]))
                r = [min(r[i] + math.exp(min(logs[i], _MAX_LOG)), cap) for i in range(_SIZE)]
            for d in range(len(DETECTORS)):
                out[d].append(_mix(r, d))
        return out

    def to_state(self) -> dict[str, Any]:
        """JSON-able, for the suite table's changelog record (keys in a fixed order)."""
        return {
            "seen": dict(sorted(self.seen.items())),
            "hours": [[h, *self.hours[h]] for h in sorted(self.hours)],
            "days": {e: [[d, *b[d]] for d in sorted(b)] for e, b in sorted(self.days.items())},
            "runs": self.runs,
            "top": self.top_hour,
        }

    def copy(self) -> SuiteState:
        """An independent copy, so that a batch can go back to the state before it."""
        return SuiteState(
            dict(self.seen),
            {h: list(v) for h, v in self.hours.items()},
            {e: {d: list(v) for d, v in b.items()} for e, b in self.days.items()},
            self.runs,
            self.top_hour,
        )

    def to_json(self) -> bytes:
        """Serialized for the suite table's changelog."""
        return json.dumps(self.to_state(), separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> SuiteState:
        """Load `to_json`'s output; raises ValueError when it is not one."""
        try:
            data: Any = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"suite state is not JSON: {exc}") from None
        if not isinstance(data, dict) or set(data) != {"seen", "hours", "days", "runs", "top"}:
            raise ValueError("not a suite state")
        seen, hours, days, runs, top = (data[k] for k in ("seen", "hours", "days", "runs", "top"))
        if not isinstance(seen, dict) or not all(
            isinstance(k, str) and _count(v, 2**63) for k, v in seen.items()
        ):
            raise ValueError("suite state has bad sequences")
        if not _count(runs, 2**63) or not (top is None or _integer(top)):
            raise ValueError("suite state has a bad run count or newest hour")
        state = cls(dict(seen), _buckets(hours), {}, runs, top)
        if not isinstance(days, dict):
            raise ValueError("suite state has bad days")
        for experiment, rows in days.items():
            if not isinstance(experiment, str):
                raise ValueError("suite state has a bad experiment")
            state.days[experiment] = _buckets(rows)
        if top is None and (state.hours or state.days):
            raise ValueError("suite state has buckets but no newest hour")
        if top is not None and (
            any(not top - HOURS < h <= top for h in state.hours)
            or any(not top // 24 - DAYS < d <= top // 24 for b in state.days.values() for d in b)
        ):
            raise ValueError("suite state has buckets outside its windows")
        return state


def _buckets(rows: Any) -> dict[int, list[int]]:
    """Stored buckets: a list of [bucket, evidence...], buckets unique."""
    if not isinstance(rows, list):
        raise ValueError("suite state has bad buckets")
    out: dict[int, list[int]] = {}
    for row in rows:
        if (
            not isinstance(row, list)
            or len(row) != _SIZE + 1
            or not all(_integer(v) for v in row)
            or row[0] in out
        ):
            raise ValueError("suite state has a bad bucket")
        out[row[0]] = list(row[1:])
    return out


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any, most: int) -> bool:
    return _integer(value) and 0 <= value <= most


def _accumulate(into: list[int], values: Contribution | list[int]) -> None:
    for i, v in enumerate(values):
        into[i] += v


def _exp(units: int) -> float:
    return math.exp(min(units / LOG_UNIT, _MAX_LOG))


def _weight() -> float:
    return 1.0 / len(FALLS)


def _mix(r: list[float], d: int) -> float:
    start = d * len(FALLS)
    return _weight() * math.fsum(r[start : start + len(FALLS)])


def _ratio(statistic: float, threshold: float) -> float:
    return min(1.0, math.log1p(statistic) / math.log1p(threshold))


def suite_tier(suite: str, tier: str, state: SuiteState, design: DropDesign) -> SuiteTier:
    """What a suite's tier shows (the suite hop's output, and `replay`'s "suites")."""
    status = state.status(design)
    return SuiteTier(
        suite=suite,
        tier=tier,
        experiments=status.experiments,
        runs=status.runs,
        drop=SuiteDrop(dropped=status.dropped, evidence=status.evidence),
    )


def fold_suite_runs(
    runs: list[tuple[str, SuiteRun]],
    load: Callable[[str], SuiteState | None],
    design: DropDesign,
) -> FoldedBatch[str, SuiteState, bool, SuiteTier]:
    """A batch of suite runs (suite key, run) into their suites, each changed one reported
    once; a repeat changes nothing. The suite hop's fold."""

    def step(state: SuiteState, run: SuiteRun) -> tuple[bool, bool]:
        added = state.add(run)
        return added, added

    def finish(key: str, state: SuiteState) -> SuiteTier:
        return suite_tier(*split_tier_key(key), state, design)

    return KeyedFold(load, lambda _: SuiteState(), SuiteState.copy, step, finish).run(runs)
