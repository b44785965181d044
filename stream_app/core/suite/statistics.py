"""The suite tier's detectors as one cache, made again from the shares whenever a removal leaves
it stale: the pooled detector's (`pooled`) and the sparse detector's (`sparse`) inputs and
statistics, kept up to date cell by cell; and what they show (`SuiteStatus`).
docs/statistics.md, 'Suites'."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from stream_app.core.drop_detector import DETECTORS, FALLS, Detector, DropDesign
from stream_app.core.suite.arithmetic import (
    POOLED_SHARE,
    detector_mean,
    evidence_ratio,
)
from stream_app.core.suite.evidence import Evidence
from stream_app.core.suite.pooled import PooledStatistics
from stream_app.core.suite.share import ExperimentShare
from stream_app.core.suite.sparse import HoursOf, SparseStatistics
from stream_app.core.suite.window import SuiteClock

MIN_EXPERIMENTS: Final = 2
"""Experiments with runs in the window a suite needs to page: one is its own tier's business."""


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


def thresholds(design: DropDesign) -> tuple[float, float]:
    """The pooled and the sparse statistics' thresholds: the design's false-page budget split
    between them by POOLED_SHARE."""
    return design.threshold / POOLED_SHARE, design.threshold / (1 - POOLED_SHARE)


def read_detectors(
    pooled: list[list[float]],
    sparse: list[list[float]],
    pooled_threshold: float,
    sparse_threshold: float,
    watched: int,
) -> tuple[bool, dict[Detector, float]]:
    """Whether a page is in effect (`watched` experiments with evidence in the window, and
    either statistic of either detector at its threshold at any end in the window), and each
    detector's evidence ratio now."""
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


@dataclass(slots=True)
class SuiteStatistics:
    """Both detectors' inputs and statistics, and the cap they were made with."""

    pooled: PooledStatistics = field(default_factory=PooledStatistics)
    sparse: SparseStatistics = field(default_factory=SparseStatistics)
    cap: float | None = None

    @classmethod
    def of(cls, shares: Mapping[str, ExperimentShare], clock: SuiteClock) -> SuiteStatistics:
        """Made from the shares' hours in the window of `clock`."""
        out = cls()
        if clock.top is None:
            return out
        first = clock.first_day()
        whole_days: dict[str, list[tuple[int, list[int]]]] = {}
        for name, share in shares.items():
            own = whole_days[name] = []
            for hour, values in share.hours.items():
                if clock.holds(hour):
                    out.pooled.add(hour, values)  # `valid` None: no statistics yet to keep
                    out.pooled.enter(hour)
                    if hour // 24 >= first:
                        own.append((hour, values))
            own.sort()
        out.sparse.rebuild(first, out.pooled.sums, whole_days)
        return out

    def evidence(
        self, experiment: str, hour: int, values: Evidence | list[int], first: int
    ) -> None:
        """A cell's change of `experiment` at `hour` (in the window) into both detectors."""
        self.pooled.add(hour, values)
        self.sparse.changed(experiment, hour, values, first)

    def hour_left(self, hour: int, first: int, hours_of: HoursOf) -> None:
        """An experiment's evidence at `hour` (in the window, already taken out) is gone."""
        if self.pooled.leave(hour):
            self.sparse.end_left(hour, first, self.pooled.sums, hours_of)

    def flush(self, first: int, hours_of: HoursOf) -> None:
        """The sparse detector's pending changes in."""
        self.sparse.flush(first, self.pooled.sums, hours_of)

    def slide(self, first: int, holds: Callable[[int], bool]) -> None:
        """The window moved (the pending changes already in)."""
        self.pooled.slide(holds)
        self.sparse.slide(first, holds)

    def read(
        self, design: DropDesign, first: int | None, hours_of: HoursOf, watched: int
    ) -> tuple[bool, dict[Detector, float]]:
        """Whether a page is in effect, and each detector's evidence ratio (`first`: the
        window's first whole day; None without a window)."""
        pooled_threshold, sparse_threshold = thresholds(design)
        cap = sparse_threshold * len(FALLS)
        if cap != self.cap:
            self.cap, self.pooled.valid, self.sparse.valid = cap, None, 0
        pooled = self.pooled_values(pooled_threshold)
        sparse = self.sparse_values(sparse_threshold, first, hours_of)
        return read_detectors(pooled, sparse, pooled_threshold, sparse_threshold, watched)

    def pooled_values(self, threshold: float) -> list[list[float]]:
        """The pooled detector's statistic after each hour with evidence in the window."""
        return self.pooled.statistics(threshold)

    def sparse_values(
        self, threshold: float, first: int | None, hours_of: HoursOf
    ) -> list[list[float]]:
        """The sparse detector's statistic at each end hour, the pending changes in."""
        if first is not None:
            self.flush(first, hours_of)
        start = first if first is not None and self.sparse.ends else 0
        return self.sparse.statistics(threshold, start, self.pooled.sums)

    def copy(self) -> SuiteStatistics:
        """An independent copy (after a `flush`)."""
        return SuiteStatistics(self.pooled.copy(), self.sparse.copy(), self.cap)
