"""Experiments as the units of a suite figure: once the harness has moved on from a task, its
observed rate (or its tiers' difference) is one bounded draw whose conditional mean is the task's
true one, and a betting confidence sequence over those draws narrows like 1 / sqrt(tasks),
however many runs each task had (Waudby-Smith & Ramdas 2023). The run-level test of
`suite_comparison` cannot: it weighs tasks by their runs. docs/statistics.md, 'Suite comparisons'.

Notation: the paper's X_i (a unit's value in [0, 1]) is `values[i]`, its predictable estimate
mu-hat_i is `estimate_before`, and sum (X_i - mu-hat_i)^2 is `unit_spread`; the bets lambda and
their mixture are `bet_mixture`'s, weighted towards the large bets units want (`UNIT_WEIGHTS`)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Final

from stream_app.metrics.bet_mixture import log_weights, needed
from stream_app.metrics.intervals import Interval
from stream_app.metrics.suite_outcomes import estimate_before

UNIT_WEIGHTS: Final = log_weights(0)
"""The mixture's weights for units: the most on the largest bet, 0.9. A unit's value varies
little about its mean (a task's difference is a few points from its neighbours'), so the best bet
is large from a few tens of tasks on."""


def closing_times(starts: Sequence[int], latest: Sequence[int]) -> list[int | None]:
    """When each of a tier's strata closed: the first start of one of the tier's strata after its
    latest run, the moment its harness had moved on (None: none started since: still open).
    `starts[i]`, `latest[i]`: the first run of stratum i's current incarnation and its latest."""
    ordered = sorted(starts)
    out: list[int | None] = []
    for last in latest:
        i = bisect.bisect_right(ordered, last)
        out.append(ordered[i] if i < len(ordered) else None)
    return out


def unit_values_in_order(
    values: Sequence[float], closed: Sequence[int | None]
) -> tuple[list[float], int]:
    """The closed units' values in the order they closed (ties in the given order), and how
    many are still open."""
    order = sorted((c, i) for i, c in enumerate(closed) if c is not None)
    return [values[i] for _, i in order], len(values) - len(order)


def unit_spread(values: Sequence[float]) -> float:
    """The units' spread about the estimate before each, in their closing order: sum (X_i -
    mu-hat_i)^2, mu-hat_i = (the sum of the values before + 1/2) / (i + 1)."""
    total = spread = 0.0
    for i, x in enumerate(values):
        spread += (x - estimate_before(total, i)) ** 2
        total += x
    return spread


def widen_by_open(closed: Interval, units: int, open_units: int) -> Interval:
    """The closed units' interval for their mean as one for the mean over every unit, each open
    one anywhere in [0, 1]."""
    count = units + open_units
    if count == 0:
        return Interval(0.0, 1.0)
    low = units * closed.low / count
    high = (units * closed.high + open_units) / count
    return Interval(max(0.0, low), min(1.0, high))


def as_difference(interval: Interval) -> Interval:
    """An interval on (D + 1) / 2 as one on D."""
    return Interval(2 * interval.low - 1, 2 * interval.high - 1)


def difference_unit(tier_rate: float, base_rate: float) -> float:
    """A paired task's unit value: (its tier's rate - the baseline's + 1) / 2, in [0, 1]."""
    return min(1.0, max(0.0, (tier_rate - base_rate + 1) / 2))


def units_sequence(values: Sequence[float], confidence: float) -> Interval:
    """A confidence sequence for the mean of the units' true means (`values`: in [0, 1], in the
    order they closed; none: [0, 1]). Each side rejects a mean once the mixture of the units'
    evidence against it reaches 2 / (1 - confidence); the spread is the same either way."""
    if not values:
        return Interval(0.0, 1.0)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    level = math.log(2 / (1 - confidence))
    mean = math.fsum(values) / len(values)
    margin = needed(unit_spread(values), level, UNIT_WEIGHTS) / len(values)
    return Interval(max(0.0, mean - margin), min(1.0, mean + margin))
