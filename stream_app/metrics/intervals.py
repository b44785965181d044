"""Intervals for the numbers people compare: a pass rate, a mean score, a tier against its baseline.

People act the moment a difference looks real, so the cumulative intervals are confidence
sequences, valid however often they are read; only the window's `wilson_interval` is
fixed-sample. Sums and counts only: O(1) state per tier. The methods and their coverage:
docs/statistics.md, 'The intervals'."""

from __future__ import annotations

import math
import sys
from functools import lru_cache
from statistics import NormalDist
from typing import Final, NamedTuple

TIGHTEST_RUNS: Final = 400
"""Runs per tier at which a difference's interval is narrowest for its level (it is valid at every
count; elsewhere it is somewhat wider than it could be)."""
_SUB_GAUSSIAN_VARIANCE: Final = 0.25
_NEWTON_STEPS: Final = 100
_LOG_TINY: Final = math.log(sys.float_info.min)


class Interval(NamedTuple):
    """[low, high]."""

    low: float
    high: float

    def excludes(self, value: float) -> bool:
        """Whether `value` lies outside the interval."""
        return value < self.low or value > self.high


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of a confidence level (0.95 -> 1.96)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_lower(passes: float, runs: int, z: float) -> float:
    """The Wilson score interval's lower end at `z` (one-sided use: z=2 is 97.7 %)."""
    if runs <= 0 or passes <= 0:
        return 0.0
    p = passes / runs
    z2 = z * z
    centre = p + z2 / (2 * runs)
    half = z * math.sqrt(max(p * (1 - p), 0.0) / runs + z2 / (4 * runs * runs))
    return max(0.0, (centre - half) / (1 + z2 / runs))


def wilson_interval(passes: float, runs: int, confidence: float = 0.95) -> Interval:
    """The fixed-sample Wilson score interval of a pass rate; [0, 1] for no runs."""
    if runs <= 0:
        return Interval(0.0, 1.0)
    z = z_of(confidence)
    return Interval(wilson_lower(passes, runs, z), 1.0 - wilson_lower(runs - passes, runs, z))


def _log_mixture(total: float, runs: int) -> float:
    """Log of the Beta(1/2, 1/2) mixture of the binomial likelihood (without the coefficient)."""
    return (
        math.lgamma(total + 0.5)
        + math.lgamma(runs - total + 0.5)
        - math.lgamma(runs + 1.0)
        - 2 * math.lgamma(0.5)
    )


SEQUENCES_KEPT: Final = 4096
"""How many `mean_sequence` answers are remembered: a cross-tier report asks for its baseline's
once per tier it compares, and the tiers a batch did not touch ask again with the same counts."""


def mean_sequence(total: float, runs: int, confidence: float = 0.95) -> Interval:
    """A confidence sequence for the mean of values in [0, 1], from their sum: every mean m whose
    mixture likelihood ratio against m is below 1 / (1 - confidence). [0, 1] for no runs.

    The log ratio, f(m) = log mixture - total log m - (runs - total) log(1 - m), is convex with
    its least value at total / runs; each end is found by Newton's method from outside, where it
    converges monotonically."""
    return _mean_sequence(total, runs, confidence)


@lru_cache(maxsize=SEQUENCES_KEPT)
def _mean_sequence(total: float, runs: int, confidence: float) -> Interval:
    if runs <= 0:
        return Interval(0.0, 1.0)
    total = min(max(total, 0.0), float(runs))
    level = _log_mixture(total, runs) - math.log(1 / (1 - confidence))
    # the upper end through the failures' lower one, rounded up (1 - x loses x's low bits)
    high = min(1.0, math.nextafter(1.0 - _edge(runs - total, runs, level), math.inf))
    return Interval(_edge(total, runs, level), high)


def _edge(total: float, runs: int, level: float) -> float:
    """The lower end: the m below total / runs where total log m + (runs - total) log(1 - m)
    falls to `level` (< 0); 0 when there is no total. Newton's method in u = log m, where the
    excess g(u) is convex and decreasing below the estimate: from a point outside (g > 0) every
    step stays outside and moves toward the end."""
    if total <= 0:
        return 0.0
    failures = runs - total
    top = math.log(total / runs)

    def excess(u: float) -> float:
        return level - total * u - failures * math.log1p(-math.exp(u))

    u = max(min(level / total, top) - 1.0, _LOG_TINY)
    while excess(u) <= 0:  # not outside yet: twice as far below the estimate
        if u <= _LOG_TINY:
            return 0.0  # inside even at the smallest normal float: the end is 0
        u = max(top - 2 * (top - u), _LOG_TINY)
    for _ in range(_NEWTON_STEPS):
        m = math.exp(u)
        slope = -total + failures * m / (1 - m)
        if slope >= 0:
            break
        moved = min(u - excess(u) / slope, top)
        if moved - u <= 1e-13 * max(1.0, abs(u)):
            u = moved
            break
        u = moved
    return math.exp(u)


def difference_sequence(
    total_a: float, runs_a: int, total_b: float, runs_b: int, confidence: float = 0.95
) -> Interval:
    """A confidence sequence for mean(a) - mean(b) of two independent streams in [0, 1].

    Valid however the two streams' values interleave; [-1, 1] while either has no run. The
    intersection of the ellipse's shadow (narrow near 1/2) and the difference of the two means' own
    sequences (narrow near 0 and 1), each with half the error: a union bound (docs/statistics.md,
    'A tier against the baseline')."""
    if runs_a <= 0 or runs_b <= 0:
        return Interval(-1.0, 1.0)
    error = 1 - confidence
    shadow = _ellipse_shadow(total_a, runs_a, total_b, runs_b, 1 - error / 2)
    a = mean_sequence(total_a, runs_a, 1 - error / 4)
    b = mean_sequence(total_b, runs_b, 1 - error / 4)
    return Interval(max(shadow.low, a.low - b.high), min(shadow.high, a.high - b.low))


def _ellipse_shadow(
    total_a: float, runs_a: int, total_b: float, runs_b: int, confidence: float
) -> Interval:
    """Each stream's centred sum S (about its true mean) makes the normal-mixture martingale
    sqrt(rho / (rho + V)) exp(S^2 / (2 (rho + V))), V = runs / 4; their product is one too, and
    Ville's inequality bounds the chance it ever reaches 1 / (1 - confidence). Where it has not,
    the two means lie in an ellipse; its shadow on mean(a) - mean(b) is this interval."""
    log_alpha = math.log(1 / (1 - confidence))
    rho = _rho(log_alpha)
    v_a, v_b = runs_a * _SUB_GAUSSIAN_VARIANCE, runs_b * _SUB_GAUSSIAN_VARIANCE
    level = log_alpha + 0.5 * math.log((rho + v_a) / rho) + 0.5 * math.log((rho + v_b) / rho)
    spread = (rho + v_a) / (runs_a * runs_a) + (rho + v_b) / (runs_b * runs_b)
    half = math.sqrt(2 * level * spread)
    estimate = total_a / runs_a - total_b / runs_b
    return Interval(max(-1.0, estimate - half), min(1.0, estimate + half))


def _rho(log_alpha: float) -> float:
    """The mixture's precision that makes one stream's boundary narrowest at TIGHTEST_RUNS runs
    (Howard, Ramdas, McAuliffe & Sekhon 2021, the normal-mixture boundary's tuning)."""
    tightest = TIGHTEST_RUNS * _SUB_GAUSSIAN_VARIANCE
    return tightest / (2 * log_alpha + math.log(1 + 2 * log_alpha))
