"""The suite detectors' arithmetic: the sparse detector's term of an experiment's evidence, the
weight of a change point, and a detector's statistic read against its threshold.
docs/statistics.md, 'Suites'."""

from __future__ import annotations

import math
from typing import Final

from schemas.suite_feed import LOG_UNIT
from stream_app.core.drop_detector import FALLS
from stream_app.core.suite.evidence import SIZE, Evidence

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
_MAX_LOG: Final = 700.0


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
