"""A suite's figures over its experiments, each weighing the same: a tier's pass rate or mean
composite, and its difference from the baseline paired by experiment, valid at every look.

Each `(experiment, tier)` is a stratum whose runs make the empirical-Bernstein supermartingale
exp(lam (P - n mu) - psi(lam) Q) (P: the sum of their values, Q: their spread); so does the
product over strata. A value is rejected when, even with the strata's rates most favourable to it
(a linear programme), the mixture over bets reaches 2 / (1 - confidence). A difference pins each
tier's mean to its own interval; the closed experiments' sequence (`suite_units`) bounds each
figure too. docs/statistics.md, 'Suite comparisons'."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, NamedTuple

from stream_app.metrics.bet_mixture import needed
from stream_app.metrics.intervals import Interval
from stream_app.metrics.suite_outcomes import Figure, Outcomes, Stratum
from stream_app.metrics.suite_strata import SizeGroups, StrataSet
from stream_app.metrics.suite_units import (
    ClosedUnits,
    UnitsOfFigure,
    as_difference,
    closing_times,
    difference_unit,
)

PIN_SHARE: Final = 0.025
"""The share of a difference's error each tier's pin takes."""
UNIT_SHARE: Final = 0.001
"""The share of a figure's error the closed experiments' interval (`suite_units`) takes; the
run-level test has the rest. Chosen by seeded simulation (docs/statistics.md, 'Why 0.1 %'):
units narrow a suite only past about a hundred tasks, and any larger share costs the run-level
test power at 30 to 50 tasks (at 0.01, one suite in 1,000 on four of the five power rows)."""
_GOLDEN_STEPS: Final = 90
_INVERSE_GOLDEN: Final = (math.sqrt(5) - 1) / 2


Term = tuple[int, Stratum]
"""A stratum's sign in the figure (+1; -1 for the baseline's) and the stratum."""


class Pins(NamedTuple):
    """Where the mean true rate of the + strata, and of the - strata, lie (their intervals)."""

    plus: Interval
    minus: Interval


def signed_sets(terms: Sequence[Term]) -> tuple[StrataSet, StrataSet]:
    """The + strata and the - strata of a figure's terms."""
    plus = StrataSet(s for sign, s in terms if sign > 0)
    return plus, StrataSet(s for sign, s in terms if sign < 0)


def equal_weight_mean(terms: Sequence[Term], count: int) -> float:
    """The figure: the sum over strata of sign x rate, over `count` experiments."""
    return strata_mean(*signed_sets(terms), count)


def strata_mean(plus: StrataSet, minus: StrataSet, count: int) -> float:
    """`equal_weight_mean` of the + and the - strata."""
    return math.fsum(plus.rates.partials + minus.rates.negated()) / count


def equal_weight_sequence(
    terms: Sequence[Term], count: int, confidence: float, pins: Pins | None = None
) -> Interval:
    """A confidence sequence for the figure's true value: the sum over strata of sign x the
    mean of their runs' own rates, over `count` experiments; with `pins`, valid while the
    strata's mean rates lie in them. Every stratum needs a run."""
    if not terms or any(s.runs <= 0 for _, s in terms):
        raise ValueError("a suite figure needs experiments, each stratum with runs")
    return strata_sequence(*signed_sets(terms), count, confidence, pins)


def strata_sequence(
    plus: StrataSet, minus: StrataSet, count: int, confidence: float, pins: Pins | None = None
) -> Interval:
    """`equal_weight_sequence` of the + and the - strata: its cost grows with their distinct
    run counts, not with their number."""
    if count <= 0 or not plus.count + minus.count:
        raise ValueError("a suite figure needs experiments, each stratum with runs")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    level = math.log(2 / (1 - confidence))
    estimate = strata_mean(plus, minus, count)
    if pins is None:
        low, high = _knapsack(plus, minus, count, level), -_knapsack(minus, plus, count, level)
    else:
        low = _dual(plus, minus, count, level, pins)
        high = -_dual(minus, plus, count, level, Pins(pins.minus, pins.plus))
    least, most = -minus.count / count, plus.count / count
    return Interval(max(least, min(low, estimate)), min(most, max(high, estimate)))


def _evidence_bound(plus: StrataSet, minus: StrataSet, level: float) -> float:
    """F: theta is rejected while the most favourable rates' sum of sign x n x rate is at most
    F, the sum of sign x outcomes less the evidence the mixture needs."""
    evidence = needed(math.fsum(plus.spreads.partials + minus.spreads.partials), level)
    return math.fsum(plus.totals.partials + minus.totals.negated()) - evidence


def _knapsack(plus: StrataSet, minus: StrataSet, count: int, level: float) -> float:
    """The least theta the test of 'figure <= theta' does not reject. With u = rate for a +
    stratum and 1 - rate for a - one, the null's most favourable rates maximise sum(n u) given
    sum(u) <= count theta + the - strata: the largest strata first."""
    budget = _evidence_bound(plus, minus, level) + minus.runs  # runs: an int
    groups = SizeGroups((plus, minus), descending=True)
    return ((_units(groups, budget) if budget > 0 else 0.0) - minus.count) / count


def _units(groups: SizeGroups, budget: float) -> float:
    """The most units b (each stratum's u up to 1) whose knapsack, largest first, holds at most
    `budget`: whole groups of one run count while they fit, then as many of the next as fit."""
    filled = 0
    for g, runs in enumerate(groups.sizes):
        first, many = groups.starts[g], groups.starts[g + 1] - groups.starts[g]
        if filled + many * runs <= budget:
            filled += many * runs
            continue
        fit = min(many - 1, max(0, int((budget - filled) // runs)))
        while fit < many - 1 and filled + (fit + 1) * runs <= budget:
            fit += 1
        while fit > 0 and filled + fit * runs > budget:
            fit -= 1
        return first + fit + (budget - (filled + fit * runs)) / runs
    return float(groups.count)


def _dual(plus: StrataSet, minus: StrataSet, count: int, level: float, pins: Pins) -> float:
    """The least theta not rejected while each sign's strata have their mean rate within its
    pin, or a little less: the least theta is the linear programme min sum(sign x rate) / count
    given sum(sign x n x rate) >= F, the pins and rates in [0, 1]; any multipliers of its dual
    give a value below it (weak duality). Each pin's multiplier is best in closed form for each
    multiplier a of the first constraint, and the dual is concave in a: golden-section search."""
    bound = _evidence_bound(plus, minus, level)
    up = _Group(SizeGroups((plus,), descending=True), 1, pins.plus, count)
    down = _Group(SizeGroups((minus,), descending=False), -1, pins.minus, count)

    def dual(log_a: float) -> float:
        a = math.exp(log_a)
        return a * bound + up.best(a) + down.best(a)

    sizes = up.groups.sizes + down.groups.sizes
    low, high = math.log(1e-9 / max(sizes)), math.log(4.0 / min(sizes))
    x1 = high - _INVERSE_GOLDEN * (high - low)
    x2 = low + _INVERSE_GOLDEN * (high - low)
    f1, f2 = dual(x1), dual(x2)
    best = max(f1, f2, -float(minus.count))  # a = 0: the least theta there is
    for _ in range(_GOLDEN_STEPS):
        if f1 < f2:
            low, x1, f1 = x1, x2, f2
            x2 = low + _INVERSE_GOLDEN * (high - low)
            f2 = dual(x2)
        else:
            high, x2, f2 = x2, x1, f1
            x1 = high - _INVERSE_GOLDEN * (high - low)
            f1 = dual(x1)
        best = max(best, f1, f2)
    return best / count


class _Group:
    """One sign's strata in the dual: their run counts grouped in the order that sorts r =
    sign (a n - 1) from largest to least, and the pin on their mean rate."""

    def __init__(self, groups: SizeGroups, sign: int, pin: Interval, count: int) -> None:
        self.groups = groups
        self.sign = sign
        self.top, self.bottom = count * pin.high, count * pin.low
        # The strata whose r may be where h's slope crosses 0: next to each pin's edge.
        edges: list[tuple[int, bool]] = []
        for edge, positive in ((self.top, True), (self.bottom, False)):
            k = math.floor(edge) if positive else math.ceil(edge) - 1
            edges += [
                (groups.size_at(i), positive) for i in (k - 1, k, k + 1) if 0 <= i < groups.count
            ]
        self.edges = tuple(edges)
        """The run counts of those strata, with the pin's side."""

    def best(self, a: float) -> float:
        """The max over t of h(t) = sum over the strata of min(0, t - r) - t top (t >= 0) or
        - t bottom (t < 0): t is the pin's net multiplier. h is concave, its slope the strata
        with r above t less top (or bottom): it is largest where that count crosses them, or at
        0. Any t gives a valid bound; these are the best."""
        sign, sizes, groups = self.sign, self.groups.sizes, self.groups
        candidates = [0.0]
        for size, positive in self.edges:
            r = sign * (a * size - 1)
            if (r > 0) == positive:
                candidates.append(r)
        # h at each candidate: the groups with r = sign (a n - 1) above t by bisection (r
        # descending). The hot loop of every suite comparison, so written out in one place.
        best = -math.inf
        for t in candidates:
            g, high = 0, len(sizes)
            while g < high:
                middle = (g + high) // 2
                if sign * (a * sizes[middle] - 1) > t:
                    g = middle + 1
                else:
                    high = middle
            j, prefix = groups.starts[g], groups.sums[g]
            pin = self.top if t >= 0 else self.bottom
            h = j * t - sign * (a * prefix - j) - t * pin
            best = max(best, h)
        return best


class SuiteFigure(NamedTuple):
    """A suite figure: its estimate, its interval, and the experiments it covers."""

    estimate: float
    low: float
    high: float
    experiments: int


class Paired(NamedTuple):
    """An experiment both a tier and the baseline have runs in: their outcomes, and when both
    had closed (`closings`; None: one is still open)."""

    tier: Outcomes
    baseline: Outcomes
    closed: int | None


def closings(strata: Sequence[Outcomes]) -> list[int | None]:
    """When each of a tier's strata closed: another of them started after its latest run."""
    return closing_times([o.start for o in strata], [o.latest for o in strata])


def suite_mean(
    strata: Sequence[Outcomes],
    confidence: float,
    figure: Figure = Figure.PASS_RATE,
    closed: Sequence[int | None] | None = None,
) -> SuiteFigure | None:
    """A tier's mean of `figure` over the experiments it has runs in (`strata`: all of the
    tier's, in one fixed order), each weighing the same (None with none): `mean_of` them.
    `closed`: `closings(strata)`, when the caller has it already."""
    closed = closings(strata) if closed is None else closed
    ran = [(o.of(figure), c) for o, c in zip(strata, closed, strict=True) if o.runs]
    units: ClosedUnits[int] = ClosedUnits()
    for i, (stratum, c) in enumerate(ran):
        units.put(i, c, stratum.total / stratum.runs)
    return mean_of(StrataSet(s for s, _ in ran), units, confidence)


def mean_of(strata: StrataSet, units: UnitsOfFigure, confidence: float) -> SuiteFigure | None:
    """A tier's mean over its strata with runs (None with none) and their units: the run-level
    test's interval at 1 - UNIT_SHARE of the error, within the closed experiments' at the
    rest."""
    count = strata.count
    if not count:
        return None
    error = 1 - confidence
    none = StrataSet()
    runs = strata_sequence(strata, none, count, 1 - (1 - UNIT_SHARE) * error)
    interval = _within(runs, units.interval(1 - UNIT_SHARE * error))
    return SuiteFigure(strata_mean(strata, none, count), *interval, count)


def paired_difference(
    pairs: Sequence[Paired], confidence: float, figure: Figure = Figure.PASS_RATE
) -> SuiteFigure | None:
    """A tier's mean of `figure` minus the baseline's, paired by experiment: over the
    experiments in which both have runs, each weighing the same (None with none; `pairs` in one
    fixed order): `difference_of` them."""
    both = [(p.tier.of(figure), p.baseline.of(figure), p.closed) for p in pairs]
    both = [(t, b, c) for t, b, c in both if t.runs and b.runs]
    units: ClosedUnits[int] = ClosedUnits()
    for i, (t, b, c) in enumerate(both):
        units.put(i, c, difference_unit(t.total / t.runs, b.total / b.runs))
    tier, base = StrataSet(t for t, _, _ in both), StrataSet(b for _, b, _ in both)
    return difference_of(tier, base, units, confidence)


def difference_of(
    tier: StrataSet, base: StrataSet, units: UnitsOfFigure, confidence: float
) -> SuiteFigure | None:
    """The paired difference of the tier's and the baseline's strata (one each a pair; None
    with none) and the pairs' units. Each tier's mean over the pairs is pinned to its interval
    at PIN_SHARE of the error, the closed experiments' interval takes UNIT_SHARE, the test the
    rest: all hold at once at `confidence`."""
    count = tier.count
    if not count:
        return None
    error = 1 - confidence
    none = StrataSet()
    pins = Pins(
        strata_sequence(tier, none, count, 1 - PIN_SHARE * error),
        strata_sequence(base, none, count, 1 - PIN_SHARE * error),
    )
    test_share = 1 - 2 * PIN_SHARE - UNIT_SHARE
    runs = strata_sequence(tier, base, count, 1 - test_share * error, pins)
    interval = _within(runs, as_difference(units.interval(1 - UNIT_SHARE * error)))
    return SuiteFigure(strata_mean(tier, base, count), *interval, count)


def _within(runs: Interval, units: Interval) -> Interval:
    """Both intervals' common part: each holds the estimate, so it is never empty."""
    return Interval(max(runs.low, units.low), min(runs.high, units.high))
