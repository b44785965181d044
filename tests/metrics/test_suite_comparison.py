"""The suite comparisons' statistics: the test's linear programme against a brute force, the
pins, the mixture's threshold, variance adaptivity, and seeded simulations of coverage at every
look and of power on harness-shaped suites (the figures at scale: bench/suite_comparison.py)."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from bench.suite_comparison import Suite, clip, harness, speeds, twice, uniform, walk
from stream_app.metrics.bet_mixture import log_mixture, needed
from stream_app.metrics.intervals import Interval
from stream_app.metrics.suite_comparison import (
    Paired,
    Pins,
    Term,
    _dual,
    _knapsack,
    equal_weight_mean,
    equal_weight_sequence,
    paired_difference,
    signed_sets,
    suite_mean,
)
from stream_app.metrics.suite_outcomes import Figure, Outcomes, Stratum
from tests.simulation_size import trials

LEVEL = math.log(40)


def outcomes(rnd: random.Random, rate: float, runs: int) -> Outcomes:
    o = Outcomes()
    for i in range(runs):
        passed = rnd.random() < rate
        o = o.add(passed, float(passed), i)
    return o


def random_terms(rnd: random.Random, count: int, most: int = 40) -> list[Term]:
    terms: list[Term] = []
    for _ in range(count):
        rate = rnd.random()
        for sign in (1, -1):
            terms.append((sign, outcomes(rnd, rate, rnd.randint(1, most)).of(Figure.PASS_RATE)))
    return terms


def test_the_spread_is_about_the_estimate_before_each_run() -> None:
    seen = [True, True, False, True, False, False, True]
    o = Outcomes()
    for i, x in enumerate(seen):
        o = o.add(x, float(x), i)
    by_definition = math.fsum(
        (x - (sum(seen[:i]) + 0.5) / (i + 1)) ** 2 for i, x in enumerate(seen)
    )
    assert (o.runs, o.passes) == (7, 4)
    assert o.spread == pytest.approx(by_definition, rel=1e-15)


def most_favourable(terms: list[Term], count: int, theta: float) -> float:
    """The max of sum(sign n rate) over rates in [0, 1] with sum(sign rate) <= count theta, by
    brute force over the vertices (every rate 0 or 1 but at most one)."""
    best = -math.inf
    size = len(terms)
    for corner in itertools.product((0.0, 1.0), repeat=size):
        for free in (None, *range(size)):
            rates = list(corner)
            if free is not None:  # the one rate set by the constraint, if in [0, 1]
                sign = terms[free][0]
                rest = sum(
                    s * r
                    for i, ((s, _), r) in enumerate(zip(terms, rates, strict=True))
                    if i != free
                )
                rates[free] = (count * theta - rest) / sign
                if not 0 <= rates[free] <= 1:
                    continue
            if sum(s * r for (s, _), r in zip(terms, rates, strict=True)) > count * theta + 1e-12:
                continue
            best = max(best, sum(s * t.runs * r for (s, t), r in zip(terms, rates, strict=True)))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_the_least_theta_not_rejected_is_where_the_brute_force_says(seed: int) -> None:
    """theta is rejected while the most favourable rates leave evidence of at least what the
    mixture needs: just below the least theta the brute force rejects, just above it does not."""
    rnd = random.Random(seed)
    count = rnd.randint(1, 3)
    terms = random_terms(rnd, count, most=12)
    evidence = needed(math.fsum(t.spread for _, t in terms), LEVEL)
    bound = math.fsum(s * t.total for s, t in terms) - evidence
    low = _knapsack(*signed_sets(terms), count, LEVEL)
    least = -count / count
    if low > least + 1e-9:
        assert most_favourable(terms, count, low - 1e-7) <= bound + 1e-6
    if low < 1 - 1e-9:
        assert most_favourable(terms, count, low + 1e-7) > bound - 1e-6


def test_the_dual_without_pins_is_the_knapsack() -> None:
    rnd = random.Random(3)
    for _ in range(200):
        count = rnd.randint(1, 12)
        terms = random_terms(rnd, count)
        unpinned = _knapsack(*signed_sets(terms), count, LEVEL)
        free = Pins(Interval(0.0, 1.0), Interval(0.0, 1.0))
        assert _dual(*signed_sets(terms), count, LEVEL, free) == pytest.approx(unpinned, abs=1e-12)


def test_pins_only_ever_narrow_the_interval() -> None:
    rnd = random.Random(5)
    for _ in range(200):
        count = rnd.randint(1, 12)
        terms = random_terms(rnd, count)
        plus, minus = sorted(rnd.random() for _ in range(2)), sorted(rnd.random() for _ in range(2))
        pins = Pins(Interval(*plus), Interval(*minus))
        assert (
            _dual(*signed_sets(terms), count, LEVEL, pins)
            >= _knapsack(*signed_sets(terms), count, LEVEL) - 1e-12
        )


def test_a_tier_with_more_runs_than_the_baseline_cannot_move_both_rates_together() -> None:
    """T1 runs 40 times a task, T0 20, both at 0.5: with no pin, moving both tiers' rates
    together looks favourable to either end of the difference, so the interval reaches far
    beyond what the runs say. The pins hold the tiers' mean rates to their own intervals (what
    is left costs: docs/statistics.md, 'Suite comparisons')."""
    rnd = random.Random(11)
    pairs = [Paired(outcomes(rnd, 0.5, 40), outcomes(rnd, 0.5, 20), None) for _ in range(30)]
    terms = [
        term
        for t, b, _ in pairs
        for term in ((1, t.of(Figure.PASS_RATE)), (-1, b.of(Figure.PASS_RATE)))
    ]
    unpinned = equal_weight_sequence(terms, 30, 0.95)
    pinned = paired_difference(pairs, 0.95)
    assert pinned is not None
    assert unpinned.high > 0.3  # the levels moved
    assert unpinned.low < -0.25
    assert pinned.high - pinned.low < 0.65 * (unpinned.high - unpinned.low)


def test_the_mixture_reaches_its_level_at_the_evidence_needed() -> None:
    for spread in (0.25, 10.0, 300.0, 1e5):
        evidence = needed(spread, LEVEL)
        assert log_mixture(evidence, spread)[0] == pytest.approx(LEVEL, abs=1e-9)
        assert log_mixture(evidence * 0.999, spread)[0] < LEVEL


def test_a_rate_near_0_9_does_not_pay_for_the_variance_of_one_half() -> None:
    high = [Outcomes(20, 18, 20 * 0.09) for _ in range(30)]
    middle = [Outcomes(20, 10, 20 * 0.25) for _ in range(30)]
    near = suite_mean(high, 0.95)
    half = suite_mean(middle, 0.95)
    assert near is not None
    assert half is not None
    assert near.high - near.low < 0.75 * (half.high - half.low)


def test_the_interval_holds_the_estimate_and_widens_with_confidence() -> None:
    rnd = random.Random(8)
    for _ in range(50):
        count = rnd.randint(1, 20)
        pairs = [
            Paired(outcomes(rnd, uniform(rnd), 20), outcomes(rnd, uniform(rnd), 20), None)
            for _ in range(count)
        ]
        loose, tight = paired_difference(pairs, 0.99), paired_difference(pairs, 0.8)
        assert loose is not None
        assert tight is not None
        assert -1 <= loose.low <= tight.low <= tight.estimate <= tight.high <= loose.high <= 1


def test_what_no_figure_covers_is_refused_or_none() -> None:
    with pytest.raises(ValueError, match="each stratum with runs"):
        equal_weight_sequence([(1, Stratum(0, 0.0, 0.0))], 1, 0.95)
    with pytest.raises(ValueError, match="confidence"):
        equal_weight_sequence([(1, Stratum(1, 1.0, 0.25))], 1, 1.0)
    assert suite_mean([Outcomes()], 0.95) is None
    assert paired_difference([Paired(Outcomes(3, 1, 0.7), Outcomes(), 1)], 0.95) is None
    assert equal_weight_mean([(1, Stratum(4, 1.0, 1.0)), (-1, Stratum(2, 2.0, 0.5))], 1) == -0.75


@pytest.mark.simulation
@pytest.mark.parametrize(
    "shape",
    [speeds, twice, harness(-0.05)],
    ids=["tiers at different speeds", "a tier with twice the runs", "blocked subtests"],
)
def test_the_intervals_cover_at_every_look_on_harness_shaped_suites(shape: Suite) -> None:
    """Seeded suites of 30 tasks whose rates run from near 0 to near 1, read every 5 runs:
    both intervals cover their true figures at every look in at least 95 % of 60 suites (20 in
    `make test`)."""
    suites = trials(quick=20, full=60)  # quick: one miss allowed, as at full size three
    results = [walk(shape(rnd), rnd) for rnd in map(random.Random, range(500, 500 + suites))]
    assert sum(r.covered for r in results) >= 0.95 * len(results)
    assert sum(r.rate_covered for r in results) >= 0.95 * len(results)


@pytest.mark.simulation
def test_ten_points_with_20_runs_a_task_on_50_tasks_is_flagged_in_nine_suites_of_ten() -> None:
    def suite(rnd: random.Random) -> list[tuple[int, int, float]]:
        rates = [rnd.uniform(0.05, 0.85) for _ in range(50)]
        return [(e, t, clip(p + 0.1 * t)) for e, p in enumerate(rates) for t in (0, 1)] * 20

    results = [walk(suite(rnd), rnd, every=2000) for rnd in map(random.Random, range(900, 960))]
    assert sum(r.significant for r in results) >= 0.9 * len(results)


def test_the_mean_composite_is_its_own_figure_with_its_own_spread() -> None:
    """Runs that all fail with a composite of 0.8 (their implementation rate): the pass rate is
    0, the mean composite 0.8, and its interval narrow, since its values do not vary."""
    strata, baseline = [], []
    for task in range(40):
        o, b = Outcomes(), Outcomes()
        for k in range(20):
            o = o.add(False, 0.8, 100 * task + k)
            b = b.add(False, 0.0, 100 * task + k)
        strata.append(o)
        baseline.append(b)
    rate = suite_mean(strata, 0.95)
    composite = suite_mean(strata, 0.95, Figure.COMPOSITE)
    assert rate is not None
    assert composite is not None
    assert rate.estimate == 0.0
    assert composite.estimate == pytest.approx(0.8)
    assert composite.low <= 0.8 <= composite.high
    assert composite.high - composite.low < 0.1
    pairs = [Paired(t, b, None) for t, b in zip(strata, baseline, strict=True)]
    difference = paired_difference(pairs, 0.95, Figure.COMPOSITE)
    assert difference is not None  # the baseline's composites all 0
    assert difference.estimate == pytest.approx(0.8)
    assert difference.low > 0.5
