"""Seed 001's aggregate statistics, exact and NaN-free.

`math.fsum` sums (independent of the values' order), the mean clamped into [min, max], +inf
propagated to mean and std-dev. Total over every finite input: values beyond 2**500 in magnitude
are first scaled by a power of two, so no sum or square leaves the float range (docs/metrics.md,
'Per-run metrics (seed 001)', and its bounds under 'The event: `RunCompleted`')."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from operator import sub
from typing import Final

from schemas.aggregates import Statistics

MODE_DECIMALS: Final = 6


def median(values: Sequence[float]) -> float:
    """Middle value; mean of the two middle values for an even count."""
    if not values:
        raise ValueError("median of no values")
    return _median_of_sorted(sorted(values))


def _median_of_sorted(ordered: Sequence[float]) -> float:
    n = len(ordered)
    mid = n // 2
    if n % 2:
        return ordered[mid]
    low, high = ordered[mid - 1], ordered[mid]
    if low == high:  # also keeps inf + inf / 2 == inf
        return low
    total = low + high
    if math.isinf(total) and not (math.isinf(low) or math.isinf(high)):
        return low / 2 + high / 2  # two huge finite values: halve first
    return total / 2


_PLAIN_LIMIT: Final = 2.0**500
"""Below this magnitude, with fewer than 2**20 values, no sum of values or of squared deviations
can overflow, and the plain formulas run unscaled (so subnormal values keep every bit)."""


def _scale(values: Sequence[float], low: float, high: float) -> float:
    """1.0 when the plain formulas are safe, else a power of two near the largest |value|
    (`low` and `high` are the values' min and max): dividing by it is exact and leaves every
    magnitude below 2 (2**1024 is no float: the min)."""
    largest = max(abs(low), abs(high))
    if largest <= _PLAIN_LIMIT and len(values) < 2**20:
        return 1.0
    return math.ldexp(1.0, min(math.frexp(largest)[1], 1023))


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; +inf when any value is +inf."""
    if not values:
        raise ValueError("mean of no values")
    return _mean(values, min(values), max(values))


def _mean(values: Sequence[float], low: float, high: float) -> float:
    if math.isinf(high) or math.isinf(low):
        return high if math.isinf(high) else low
    if low == high:
        return low
    scale = _scale(values, low, high)
    if scale == 1.0:  # v / 1.0 is v: the same sum without the divisions
        scaled_mean = math.fsum(values) / len(values)
    else:
        scaled_mean = math.fsum(v / scale for v in values) / len(values)
    return min(max(scaled_mean * scale, low), high)


def _scaled_variance(
    values: Sequence[float], mu: float, low: float, high: float
) -> tuple[float, float]:
    """(σ² / s², s) for a power of two s, given the values' mean, min and max: the variance
    is their product, the std-dev sqrt(first) · s, each +inf only when it truly exceeds the
    float range."""
    if math.isinf(mu):
        return math.inf, 1.0
    if low == high:
        return 0.0, 1.0
    scale = _scale(values, low, high)
    scaled_mu = mu / scale
    deviations = [v / scale - scaled_mu for v in values]  # each within [-4, 4]
    return math.fsum(d * d for d in deviations) / len(values), scale


def population_variance(values: Sequence[float]) -> float:
    """Σ(v - mean)² / n; +inf when any value is infinite; 0.0 for a single value."""
    if not values:
        raise ValueError("variance of no values")
    low, high = min(values), max(values)
    scaled, scale = _scaled_variance(values, _mean(values, low, high), low, high)
    return scaled * scale * scale


def std_dev(values: Sequence[float]) -> float:
    """Population standard deviation (we have every run of the window, not a sample)."""
    if not values:
        raise ValueError("std-dev of no values")
    low, high = min(values), max(values)
    return _std_dev(values, _mean(values, low, high), low, high)


def _std_dev(values: Sequence[float], mu: float, low: float, high: float) -> float:
    scaled, scale = _scaled_variance(values, mu, low, high)
    return math.sqrt(scaled) * scale


def mode(values: Sequence[float]) -> float:
    """Most frequent value after rounding to 6 decimals; the smallest among ties."""
    if not values:
        raise ValueError("mode of no values")
    return _mode(values, sorted(values))


def _mode(values: Sequence[float], ordered: Sequence[float]) -> float:
    """`mode` of `values`, given them in ascending order too. Rounding keeps their order, so
    equal rounded values are neighbours and the first of the most frequent is the smallest;
    rounding is slow (a decimal conversion), so it is done once a distinct value, or once when no
    two values are near enough to round alike. A mode of zero takes the sign of the first value
    that rounds to it, as counting the rounded values in their own order does."""
    low = ordered[0]
    if len(ordered) == 1 or (
        math.isfinite(ordered[-1] - low) and min(map(sub, ordered[1:], ordered)) > _DISTINCT_GAP
    ):
        return round(low, MODE_DECIMALS)
    best, most, current, tally = low, 0, low, 0
    for value, count in Counter(ordered).items():  # ascending; equal values (0.0, -0.0) as one
        rounded = round(value, MODE_DECIMALS)
        if tally == 0 or rounded != current:
            current, tally = rounded, 0
        tally += count
        if tally > most:
            best, most = current, tally
    if best == 0:  # 0.0 or -0.0: the first value's
        return next(r for r in (round(v, MODE_DECIMALS) for v in values) if r == 0)
    return best


_DISTINCT_GAP: Final = 4e-6
"""Values further apart than this round to different values: rounding to 6 decimals moves a
finite value by less than 1e-6 (not at all once its neighbouring floats are further apart)."""


def compute_statistics(values: Sequence[float]) -> Statistics:
    """All of seed 001's statistics over a non-empty list of values (never NaN). Once per
    published aggregate and metric: the values are sorted once, the min, max and mean found once
    and shared."""
    if not values:
        raise ValueError("statistics of no values")
    if any(map(math.isnan, values)):
        raise ValueError("NaN among the values")
    ordered = sorted(values)
    low, high = ordered[0], max(values)  # the first of equal ones, as `min` and `max` give
    mu = _mean(values, low, high)
    return Statistics(
        median=_median_of_sorted(ordered),
        mean=mu,
        mode=_mode(values, ordered),
        min=low,
        max=high,
        std_dev=_std_dev(values, mu, low, high),
        count=len(values),
    )
