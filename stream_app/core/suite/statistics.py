"""The suite detectors' arithmetic (the sparse detector's term of an experiment's evidence, the
weight of a change point, a detector's statistic read against its threshold) and the pooled
detector's statistics (`PooledStatistics`); the sparse detector's are in `sparse`. Both are
caches: `state.SuiteState` makes them again from the shares whenever it must. docs/statistics.md,
'Suites'."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from schemas.suite_runs import LOG_UNIT
from stream_app.core.drop_detector import DETECTORS, FALLS, Detector, DropDesign
from stream_app.core.suite.evidence import SIZE, Evidence
from stream_app.core.suite.share import CELL, RUNS

POOLED_SHARE: Final = 0.75
"""The false-page budget's share of the pooled detector (every experiment fell, change points
at every hour); the sparse one (some experiments fell, change points at every day) has the rest."""
SPARSE_PI: Final = 0.25
"""The share of experiments the sparse detector bets have fallen (Xie & Siegmund 2013)."""
COMPONENTS: Final = ((0, len(FALLS)), (len(FALLS), SIZE))
"""Each detector's components of a run's evidence: pass/fail falls, then score tilts."""
RUNS_PER_MINUTE: Final = 1
"""The most runs a change point weighs per minute of the period before it: the statistics' floor,
their value with no evidence at all, stays at most a run a minute through the window and the day
ahead (21,541 pooled, 20,161 sparse), far below either threshold, however busy the suite."""
MIN_EXPERIMENTS: Final = 2
"""Experiments with runs in the window a suite needs to page: one is its own tier's business."""
_MAX_LOG: Final = 700.0


@dataclass(frozen=True, slots=True)
class SuiteStatus:
    """What a suite's detectors show now: each detector's evidence ratio (log(1 + R) / log(1 +
    threshold) of its pooled and its sparse statistic now, each against its own threshold, the
    larger), whether a page is in effect (a threshold reached at any hour's or day's end in the
    window), its experiments and runs."""

    dropped: bool
    evidence: dict[Detector, float]
    experiments: int
    runs: int


def read_detectors(
    pooled: list[list[float]], sparse: list[list[float]], design: DropDesign, watched: int
) -> tuple[bool, dict[Detector, float]]:
    """Whether a page is in effect (`watched` experiments with evidence in the window, and
    either statistic of either detector at its threshold at any end in the window), and each
    detector's evidence ratio now."""
    pooled_threshold = design.threshold / POOLED_SHARE
    sparse_threshold = design.threshold / (1 - POOLED_SHARE)
    dropped = watched >= MIN_EXPERIMENTS and any(
        any(detector_mean(r, d) >= pooled_threshold for r in pooled)
        or any(detector_mean(s, d) >= sparse_threshold for s in sparse)
        for d in range(len(DETECTORS))
    )
    evidence = {
        detector: round(
            max(
                evidence_ratio(detector_mean(pooled[-1], d) if pooled else 0.0, pooled_threshold),
                evidence_ratio(detector_mean(sparse[-1], d) if sparse else 0.0, sparse_threshold),
            ),
            6,
        )
        for d, detector in enumerate(DETECTORS)
    }
    return dropped, evidence


def sparse_term(units: int) -> int:
    """log(1 - pi + pi e^L) of an experiment's log evidence L, floored in fixed point."""
    log_e = min(units / LOG_UNIT, _MAX_LOG)
    if log_e > 40:  # 1 - pi is nothing beside pi e^L
        return math.floor((math.log(SPARSE_PI) + log_e) * LOG_UNIT)
    return math.floor(math.log1p(SPARSE_PI * math.expm1(log_e)) * LOG_UNIT)


def accumulate(into: list[int], values: Evidence | list[int]) -> None:
    """`values` into `into`, as many as it holds (a cell's evidence alone into evidence)."""
    for i in range(len(into)):
        into[i] += values[i]


def change_point_weight(runs: int, minutes: int) -> int:
    """A change point's weight: the runs of the period with runs before it (an hour or a day of
    `minutes`), at most RUNS_PER_MINUTE a minute, at least 1. The change point stands for a
    change at any of those runs, so the false-page budget, counted in runs, is spent per run;
    each run weighs in one change point at most, so a statistic's mean stays at most the runs
    it has seen, as long as how many runs an hour brings does not depend on their outcomes
    (failing runs that take longer break that: docs/statistics.md, 'Suites')."""
    return max(1, min(runs, RUNS_PER_MINUTE * minutes))


def exp_units(units: int) -> float:
    """The exponential of a log in LOG_UNIT fixed point (at most e^700: it stays finite)."""
    return math.exp(min(units / LOG_UNIT, _MAX_LOG))


def detector_mean(values: list[float], detector: int) -> float:
    """A detector's statistic: the mean of its components' (its falls', or its tilts')."""
    start, end = COMPONENTS[detector]
    return math.fsum(values[start:end]) / (end - start)


def evidence_ratio(statistic: float, threshold: float) -> float:
    """log(1 + statistic) over log(1 + threshold), at most 1: how near a page it is."""
    return min(1.0, math.log1p(statistic) / math.log1p(threshold))


class PooledStatistics:
    """The pooled detector's inputs (every experiment fell, the change at any hour of the
    window): the window's evidence summed per hour over its experiments, and how many
    experiments have some at each hour; and its statistic after each of those hours."""

    def __init__(self) -> None:
        self.sums: dict[int, list[int]] = {}
        """Per hour with evidence in the window: the experiments' cells summed."""
        self.experiments: dict[int, int] = {}
        """Per hour of `sums`: how many experiments have evidence there."""
        self.hours: list[int] = []
        """The hours of `sums` in order, for `values`."""
        self.values: list[list[float]] = []
        """The statistic after each hour, up to `valid` of them."""
        self.valid: int | None = None
        """How many `values` are up to date (None: `hours` too must be made again)."""

    def add(self, hour: int, values: Evidence | list[int]) -> None:
        """A cell's change at `hour` (in the window) into its sum."""
        accumulate(self.sums.setdefault(hour, [0] * CELL), values)
        if self.valid is None:
            return
        i = bisect.bisect_left(self.hours, hour)
        if i == len(self.hours) or self.hours[i] != hour:
            self.hours.insert(i, hour)
        self.valid = min(self.valid, i)

    def enter(self, hour: int) -> None:
        """One more experiment has evidence at `hour`."""
        self.experiments[hour] = self.experiments.get(hour, 0) + 1

    def leave(self, hour: int) -> bool:
        """One experiment fewer has evidence at `hour`; True when none is left (the hour goes)."""
        self.experiments[hour] -= 1
        if self.experiments[hour]:
            return False
        del self.experiments[hour], self.sums[hour]
        self.valid = None
        return True

    def slide(self, kept: Callable[[int], bool]) -> None:
        """The window moved: the hours not `kept` go."""
        self.sums = {h: v for h, v in self.sums.items() if kept(h)}
        self.experiments = {h: n for h, n in self.experiments.items() if kept(h)}
        self.valid = None

    def statistics(self, threshold: float) -> list[list[float]]:
        """Each component's Shiryaev-Roberts statistic at the end of every hour with evidence in
        the window, in time order: R <- (w + R) exp(the hour's summed log e), the change point
        at the hour's start weighing w, the runs of the hour with runs before it
        (`change_point_weight`)."""
        if self.valid is None:
            self.hours, self.values, self.valid = sorted(self.sums), [], 0
        cap = threshold * len(FALLS)
        del self.values[self.valid :]
        r = self.values[-1] if self.values else [0.0] * SIZE
        for k in range(self.valid, len(self.hours)):
            w = change_point_weight(self.sums[self.hours[k - 1]][RUNS], 60) if k else 1
            logs = self.sums[self.hours[k]]
            r = [min((w + r[i]) * exp_units(logs[i]), cap) for i in range(SIZE)]
            self.values.append(r)
        self.valid = len(self.values)
        return self.values

    def copy(self) -> PooledStatistics:
        """An independent copy."""
        out = PooledStatistics()
        out.sums = {h: list(v) for h, v in self.sums.items()}
        out.experiments = dict(self.experiments)
        out.hours, out.values, out.valid = list(self.hours), list(self.values), self.valid
        return out
