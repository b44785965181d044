"""A suite's figures over its experiments, each weighing the same: a tier's pass rate or mean
composite, and its difference from the baseline paired by experiment, valid at every look.

Each `(experiment, tier)` is a stratum whose runs make the empirical-Bernstein supermartingale
exp(lam (P - n mu) - psi(lam) Q) (P: the sum of their values, Q: their spread); so does the
product over strata. A value is rejected when, even with the strata's rates most favourable to it
(a linear programme), the mixture over bets reaches 2 / (1 - confidence). A difference pins each
tier's mean to its own interval; the closed experiments' sequence (`suite_units`) bounds each
figure too. docs/statistics.md, 'Suite comparisons'."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Final, NamedTuple

from stream_app.metrics.bet_mixture import needed
from stream_app.metrics.intervals import Interval
from stream_app.metrics.suite_outcomes import Figure, Outcomes, Stratum
from stream_app.metrics.suite_units import (
    as_difference,
    closing_times,
    difference_unit,
    unit_values_in_order,
    units_sequence,
    widen_by_open,
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


def equal_weight_mean(terms: Sequence[Term], count: int) -> float:
    """The figure: the sum over strata of sign x rate, over `count` experiments."""
    return math.fsum(sign * s.total / s.runs for sign, s in terms) / count


def equal_weight_sequence(
    terms: Sequence[Term], count: int, confidence: float, pins: Pins | None = None
) -> Interval:
    """A confidence sequence for the figure's true value: the sum over strata of sign x the
    mean of their runs' own rates, over `count` experiments; with `pins`, valid while the
    strata's mean rates lie in them. Every stratum needs a run."""
    if count <= 0 or not terms or any(s.runs <= 0 for _, s in terms):
        raise ValueError("a suite figure needs experiments, each stratum with runs")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    level = math.log(2 / (1 - confidence))
    estimate = equal_weight_mean(terms, count)
    flipped = [(-sign, s) for sign, s in terms]
    if pins is None:
        low, high = _knapsack(terms, count, level), -_knapsack(flipped, count, level)
    else:
        low = _dual(terms, count, level, pins)
        high = -_dual(flipped, count, level, Pins(pins.minus, pins.plus))
    least = -sum(1 for sign, _ in terms if sign < 0) / count
    most = sum(1 for sign, _ in terms if sign > 0) / count
    return Interval(max(least, min(low, estimate)), min(most, max(high, estimate)))


def _evidence_bound(terms: Sequence[Term], level: float) -> float:
    """F: theta is rejected while the most favourable rates' sum of sign x n x rate is at most
    F, the sum of sign x outcomes less the evidence the mixture needs."""
    evidence = needed(math.fsum(s.spread for _, s in terms), level)
    return math.fsum(sign * s.total for sign, s in terms) - evidence


def _knapsack(terms: Sequence[Term], count: int, level: float) -> float:
    """The least theta the test of 'figure <= theta' does not reject. With u = rate for a +
    stratum and 1 - rate for a - one, the null's most favourable rates maximise sum(n u) given
    sum(u) <= count theta + the - strata: the largest strata first."""
    negatives = [s.runs for sign, s in terms if sign < 0]
    budget = _evidence_bound(terms, level) + sum(negatives)  # ints
    sizes = sorted((s.runs for _, s in terms), reverse=True)
    return ((_units(sizes, budget) if budget > 0 else 0.0) - len(negatives)) / count


def _units(sizes: list[int], budget: float) -> float:
    """The most units b (each stratum's u up to 1) whose knapsack, largest first, holds at most
    `budget`."""
    filled = 0
    for i, runs in enumerate(sizes):
        if filled + runs > budget:
            return i + (budget - filled) / runs
        filled += runs
    return float(len(sizes))


def _dual(terms: Sequence[Term], count: int, level: float, pins: Pins) -> float:
    """The least theta not rejected while each sign's strata have their mean rate within its
    pin, or a little less: the least theta is the linear programme min sum(sign x rate) / count
    given sum(sign x n x rate) >= F, the pins and rates in [0, 1]; any multipliers of its dual
    give a value below it (weak duality). Each pin's multiplier is best in closed form for each
    multiplier a of the first constraint, and the dual is concave in a: golden-section search."""
    bound = _evidence_bound(terms, level)
    plus = _Group([s.runs for sign, s in terms if sign > 0], 1, pins.plus, count)
    minus = _Group([s.runs for sign, s in terms if sign < 0], -1, pins.minus, count)

    def dual(log_a: float) -> float:
        a = math.exp(log_a)
        return a * bound + plus.best(a) + minus.best(a)

    sizes = plus.sizes + minus.sizes
    low, high = math.log(1e-9 / max(sizes)), math.log(4.0 / min(sizes))
    x1 = high - _INVERSE_GOLDEN * (high - low)
    x2 = low + _INVERSE_GOLDEN * (high - low)
    f1, f2 = dual(x1), dual(x2)
    best = max(f1, f2, -float(len(minus.sizes)))  # a = 0: the least theta there is
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
    """One sign's strata in the dual: the run counts in the order that sorts r = sign (a n - 1)
    from largest to least, with their prefix sums, and the pin on their mean rate."""

    def __init__(self, sizes: list[int], sign: int, pin: Interval, count: int) -> None:
        self.sizes = sorted(sizes, reverse=sign > 0)
        self.sign = sign
        self.prefix = [0, *itertools.accumulate(self.sizes)]
        self.top, self.bottom = count * pin.high, count * pin.low
        # The strata whose r may be where h's slope crosses 0: next to each pin's edge.
        edges: list[tuple[int, bool]] = []
        for edge, positive in ((self.top, True), (self.bottom, False)):
            k = math.floor(edge) if positive else math.ceil(edge) - 1
            edges += [(i, positive) for i in (k - 1, k, k + 1) if 0 <= i < len(self.sizes)]
        self.edges = tuple(edges)

    def best(self, a: float) -> float:
        """The max over t of h(t) = sum over the strata of min(0, t - r) - t top (t >= 0) or
        - t bottom (t < 0): t is the pin's net multiplier. h is concave, its slope the strata
        with r above t less top (or bottom): it is largest where that count crosses them, or at
        0. Any t gives a valid bound; these are the best."""
        sizes, sign, size = self.sizes, self.sign, len(self.sizes)
        candidates = [0.0]
        for i, positive in self.edges:
            r = sign * (a * sizes[i] - 1)
            if (r > 0) == positive:
                candidates.append(r)
        # h at each candidate: the strata with r = sign (a n - 1) above t by bisection (r
        # descending). The hot loop of every suite comparison, so written out in one place.
        best = -math.inf
        for t in candidates:
            j, high = 0, size
            while j < high:
                middle = (j + high) // 2
                if sign * (a * sizes[middle] - 1) > t:
                    j = middle + 1
                else:
                    high = middle
            pin = self.top if t >= 0 else self.bottom
            h = j * t - sign * (a * self.prefix[j] - j) - t * pin
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
    tier's, in one fixed order), each weighing the same (None with none): the run-level test's
    interval at 1 - UNIT_SHARE of the error, within the closed experiments' at the rest.
    `closed`: `closings(strata)`, when the caller has it already."""
    closed = closings(strata) if closed is None else closed
    ran = [(o, c) for o, c in zip(strata, closed, strict=True) if o.runs]
    if not ran:
        return None
    error = 1 - confidence
    terms = [(1, o.of(figure)) for o, _ in ran]
    runs = equal_weight_sequence(terms, len(terms), 1 - (1 - UNIT_SHARE) * error)
    own = [s.total / s.runs for _, s in terms]
    values, open_units = unit_values_in_order(own, [c for _, c in ran])
    units = units_sequence(values, 1 - UNIT_SHARE * error)
    interval = _within(runs, widen_by_open(units, len(values), open_units))
    return SuiteFigure(equal_weight_mean(terms, len(terms)), *interval, len(terms))


def paired_difference(
    pairs: Sequence[Paired], confidence: float, figure: Figure = Figure.PASS_RATE
) -> SuiteFigure | None:
    """A tier's mean of `figure` minus the baseline's, paired by experiment: over the
    experiments in which both have runs, each weighing the same (None with none; `pairs` in one
    fixed order). Each tier's mean over those experiments is pinned to its interval at
    PIN_SHARE of the error, the closed experiments' interval takes UNIT_SHARE, the test the
    rest: all hold at once at `confidence`."""
    both = [p for p in pairs if p.tier.runs and p.baseline.runs]
    if not both:
        return None
    count = len(both)
    error = 1 - confidence
    tier = [p.tier.of(figure) for p in both]
    base = [p.baseline.of(figure) for p in both]
    pins = Pins(
        equal_weight_sequence([(1, t) for t in tier], count, 1 - PIN_SHARE * error),
        equal_weight_sequence([(1, b) for b in base], count, 1 - PIN_SHARE * error),
    )
    terms = [term for t, b in zip(tier, base, strict=True) for term in ((1, t), (-1, b))]
    test_share = 1 - 2 * PIN_SHARE - UNIT_SHARE
    runs = equal_weight_sequence(terms, count, 1 - test_share * error, pins)
    own = [
        difference_unit(t.total / t.runs, b.total / b.runs) for t, b in zip(tier, base, strict=True)
    ]
    values, open_units = unit_values_in_order(own, [p.closed for p in both])
    units = units_sequence(values, 1 - UNIT_SHARE * error)
    interval = _within(runs, as_difference(widen_by_open(units, len(values), open_units)))
    return SuiteFigure(equal_weight_mean(terms, count), *interval, count)


def _within(runs: Interval, units: Interval) -> Interval:
    """Both intervals' common part: each holds the estimate, so it is never empty."""
    return Interval(max(runs.low, units.low), min(runs.high, units.high))
