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
from array import array
from collections.abc import Hashable, Sequence
from typing import Any, Final, Generic, Protocol, TypeVar

from stream_app.metrics.bet_mixture import log_weights, needed
from stream_app.metrics.exact_sum import ExactSum
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


K = TypeVar("K", bound=Hashable)


class TimedKeys(Generic[K]):
    """Keys in (time, key) order, as an array of times beside a list of keys: 16 bytes a key
    where a (time, key) tuple took 64 (a suite keeps some for every experiment and tier)."""

    __slots__ = ("keys", "times")

    def __init__(self) -> None:
        self.times = array("q")
        self.keys: list[K] = []

    def _span(self, time: int) -> tuple[int, int]:
        low = bisect.bisect_left(self.times, time)
        return low, bisect.bisect_right(self.times, time, low)

    def position(self, time: int, key: K) -> int:
        """Where (time, key) is, or would be."""
        low, high = self._span(time)
        keys: list[Any] = self.keys  # str or int keys: ordered, as a Hashable need not be
        return bisect.bisect_left(keys, key, low, high)

    def insert(self, time: int, key: K) -> int:
        """Add (time, key); returns its position."""
        i = self.position(time, key)
        self.times.insert(i, time)
        self.keys.insert(i, key)
        return i

    def remove(self, time: int, key: K) -> int:
        """Take (time, key) out; returns where it was. ValueError when it is not there."""
        i = self.position(time, key)
        if i == len(self.keys) or self.times[i] != time or self.keys[i] != key:
            raise ValueError(f"({time}, {key!r}) is not held")
        del self.times[i], self.keys[i]
        return i

    def at(self, time: int) -> list[K]:
        """The keys of `time`."""
        low, high = self._span(time)
        return self.keys[low:high]


class Span(Protocol):
    """A stratum's first run (of its incarnation) and latest run: an experiment's outcomes."""

    @property
    def start(self) -> int:
        """Its first run's time."""

    @property
    def latest(self) -> int:
        """Its latest run's time."""


class Closings:
    """`closing_times` of a tier's strata, kept as each one's first and latest run move: a run
    moves its own stratum's closing, and a new start closes again only the strata that closed
    at the start after it (or were open) and ran before it."""

    def __init__(self) -> None:
        self.spans: dict[str, Span] = {}
        """Each stratum's span, the caller's own immutable object (an experiment's outcomes),
        not a tuple of its own: a suite keeps one for every experiment of each tier."""
        self.starts: list[int] = []
        """Every stratum's start, sorted."""
        self.closed: dict[str, int | None] = {}
        self.order: TimedKeys[str] = TimedKeys()
        """The closed strata by closing time (not a set a time: most strata close at a time of
        their own)."""
        self.unclosed: set[str] = set()
        """The open strata."""

    def move(self, key: str, span: Span) -> set[str]:
        """A stratum's span now (new or moved); returns the strata whose closing changed."""
        old = self.spans.get(key)
        self.spans[key] = span
        start = span.start
        changed: set[str] = set()
        if old is not None and old.start != start:
            self._left(key, old.start, changed)
        if old is None or old.start != start:
            after = bisect.bisect_right(self.starts, start)
            following = self.starts[after] if after < len(self.starts) else None
            self.starts.insert(after, start)
            for other in self._closed_at(following):
                if self.spans[other].latest < start:
                    self._close(other, changed)
        self._close(key, changed)
        return changed

    def drop(self, key: str) -> set[str]:
        """A stratum gone; returns the strata whose closing changed (it among them)."""
        changed = {key}
        old = self.spans.pop(key, None)
        if old is not None:
            self._file(key, None, remove=True)
            self._left(key, old.start, changed)
        return changed

    def _left(self, key: str, start: int, changed: set[str]) -> None:
        """`start` (key's) is no longer a start: the strata that closed at it close again."""
        del self.starts[bisect.bisect_left(self.starts, start)]
        for other in self._closed_at(start):
            if other != key:
                self._close(other, changed)

    def _close(self, key: str, changed: set[str]) -> None:
        """Work out `key`'s closing: the first start after its latest run."""
        i = bisect.bisect_right(self.starts, self.spans[key].latest)
        closed = self.starts[i] if i < len(self.starts) else None
        if key not in self.closed or self.closed[key] != closed:
            self._file(key, closed)
            changed.add(key)

    def _closed_at(self, time: int | None) -> list[str]:
        """The strata that closed at `time` (None: the open ones)."""
        return list(self.unclosed) if time is None else self.order.at(time)

    def _file(self, key: str, closed: int | None, remove: bool = False) -> None:
        """Move `key` to its new closing time (or out of them)."""
        if key in self.closed:
            before = self.closed[key]
            if before is None:
                self.unclosed.discard(key)
            else:
                self.order.remove(before, key)
        if remove:
            self.closed.pop(key, None)
            return
        self.closed[key] = closed
        if closed is None:
            self.unclosed.add(key)
        else:
            self.order.insert(closed, key)


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
        total, spread = _next_unit(total, spread, i, x)
    return spread


def _next_unit(total: float, spread: float, i: int, x: float) -> tuple[float, float]:
    """The running sum and spread after unit i, of value x."""
    return total + x, spread + (x - estimate_before(total, i)) ** 2


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
    return _interval(math.fsum(values), unit_spread(values), len(values), confidence)


def _interval(total: float, spread: float, units: int, confidence: float) -> Interval:
    """`units_sequence` of units whose values sum to `total`, with their spread."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    level = math.log(2 / (1 - confidence))
    mean = total / units
    margin = needed(spread, level, UNIT_WEIGHTS) / units
    return Interval(max(0.0, mean - margin), min(1.0, mean + margin))


class UnitsOfFigure(Protocol):
    """A figure's units, as the comparisons read them."""

    def interval(self, confidence: float) -> Interval:
        """The mean over every unit, open ones anywhere in [0, 1]."""


class FigureValues:
    """One figure's closed units: their values in closing order, their exact sum, and their
    running sum and spread after each of the first ones (a valid prefix): two floats a unit,
    not a tuple of two objects (a suite keeps units for every experiment of each tier)."""

    __slots__ = ("spreads", "sum", "totals", "values")

    def __init__(self) -> None:
        self.values = array("d")
        self.sum = ExactSum()
        self.totals, self.spreads = array("d"), array("d")


class ClosedUnits(Generic[K]):
    """The units of one or more figures (a suite tier's pass rate and mean composite: the same
    experiments, closing at the same times) kept as their strata close, reopen and move: the
    closed ones in closing order (ties by key), once for all figures; each figure's values,
    their exact sum, and their running sum and spread, made again only from the first unit
    that changed (a unit closing after the others costs one step)."""

    def __init__(self, figures: int = 1) -> None:
        self.units: dict[K, int | None] = {}
        """Each unit's closing time (None: open); a closed one's values are in `figures`, an
        open one's count for nothing but the open units' number. Not a (time, value) tuple a
        unit and figure: 80 bytes more each, for every experiment of each tier."""
        self.order: TimedKeys[K] = TimedKeys()
        """The closed units by closing time."""
        self.figures = tuple(FigureValues() for _ in range(figures))
        """Each figure's values, in that order."""
        self.open = 0

    def put(self, key: K, closed: int | None, *values: float) -> None:
        """A unit's closing time and its value of each figure now (new or changed)."""
        if key in self.units and self.units[key] == closed:
            if closed is None:
                return
            i = self.order.position(closed, key)
            if all(f.values[i] == v for f, v in zip(self.figures, values, strict=True)):
                return
        self.remove(key)
        if closed is None:
            self.units[key] = closed
            self.open += 1
            return
        i = self.order.insert(closed, key)  # first: a time beyond the array's raises, and
        self.units[key] = closed  # the unit is then left out whole
        for figure, value in zip(self.figures, values, strict=True):
            figure.values.insert(i, value)
            del figure.totals[i:], figure.spreads[i:]
            figure.sum.add(value)

    def remove(self, key: K) -> None:
        """A unit no longer counted (its stratum has gone)."""
        if key not in self.units:
            return
        closed = self.units.pop(key)
        if closed is None:
            self.open -= 1
            return
        i = self.order.remove(closed, key)
        for figure in self.figures:
            value = figure.values[i]
            del figure.values[i], figure.totals[i:], figure.spreads[i:]
            figure.sum.remove(value)

    def interval(self, confidence: float, figure: int = 0) -> Interval:
        """The mean of a figure (the first by default) over every unit, open ones anywhere in
        [0, 1] (`widen_by_open` of `units_sequence`)."""
        kept_values = self.figures[figure]
        values = kept_values.values
        closed = len(values)
        if not closed:
            return widen_by_open(Interval(0.0, 1.0), 0, self.open)
        totals, spreads = kept_values.totals, kept_values.spreads
        kept = len(totals)
        total, spread = (totals[-1], spreads[-1]) if kept else (0.0, 0.0)
        for i in range(kept, closed):
            total, spread = _next_unit(total, spread, i, values[i])
            totals.append(total)
            spreads.append(spread)
        interval = _interval(kept_values.sum.value(), spread, closed, confidence)
        return widen_by_open(interval, closed, self.open)

    def of(self, figure: int) -> UnitsOfFigure:
        """One figure's units, as the comparisons read them."""
        return _OneFigure(self, figure)


class _OneFigure:
    """`ClosedUnits.of`."""

    __slots__ = ("figure", "units")

    def __init__(self, units: ClosedUnits[Any], figure: int) -> None:
        self.units, self.figure = units, figure

    def interval(self, confidence: float) -> Interval:
        """The figure's `ClosedUnits.interval`."""
        return self.units.interval(confidence, self.figure)
