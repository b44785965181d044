"""Seed 001's aggregate statistics, exact and NaN-free.

Sums use `math.fsum` (correctly rounded, so the result does not depend on the order of the
values), the mean is clamped into [min, max], and +inf propagates to mean and std-dev instead
of producing NaN.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Final

from schemas.aggregates import Statistics

MODE_DECIMALS: Final = 6


def median(values: Sequence[float]) -> float:
    """Middle value; mean of the two middle values for an even count."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    if n % 2:
        return ordered[mid]
    low, high = ordered[mid - 1], ordered[mid]
    if low == high:  # also keeps inf + inf / 2 == inf
        return low
    return (low + high) / 2


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; +inf when any value is +inf."""
    if not values:
        raise ValueError("mean of no values")
    low, high = min(values), max(values)
    if math.isinf(high) or math.isinf(low):
        return high if math.isinf(high) else low
    if low == high:
        return low
    return min(max(math.fsum(values) / len(values), low), high)


def population_variance(values: Sequence[float]) -> float:
    """Σ(v - mean)² / n; +inf when any value is infinite; 0.0 for a single value."""
    if not values:
        raise ValueError("variance of no values")
    mu = mean(values)
    if math.isinf(mu):
        return math.inf
    if min(values) == max(values):
        return 0.0
    return math.fsum((v - mu) ** 2 for v in values) / len(values)


def std_dev(values: Sequence[float]) -> float:
    """Population standard deviation (we have every run of the window, not a sample)."""
    return math.sqrt(population_variance(values))


def mode(values: Sequence[float]) -> float:
    """Most frequent value after rounding to 6 decimals; the smallest among ties."""
    if not values:
        raise ValueError("mode of no values")
    counts = Counter(round(v, MODE_DECIMALS) for v in values)
    top = max(counts.values())
    return min(v for v, c in counts.items() if c == top)


def compute_statistics(values: Sequence[float]) -> Statistics:
    """All of seed 001's statistics over a non-empty list of values (never NaN)."""
    if not values:
        raise ValueError("statistics of no values")
    if any(math.isnan(v) for v in values):
        raise ValueError("NaN among the values")
    return Statistics(
        median=median(values),
        mean=mean(values),
        mode=mode(values),
        min=min(values),
        max=max(values),
        std_dev=std_dev(values),
        count=len(values),
    )
