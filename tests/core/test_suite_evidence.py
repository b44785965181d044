"""A run's suite evidence: each product of e-values over runs fixed in advance has mean exactly 1
when a subtest's runs are exchangeable (checked over every order of small histories), whatever
the pass rate; a fall is evidence; the feed is bounded and loads only what a history makes."""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.suite_feed import LOG_UNIT
from stream_app.core.config import CoreConfig
from stream_app.core.drop_detector import MAX_STRATA, odds_ratios
from stream_app.core.suite.evidence import (
    MAX_SUITES,
    SIZE,
    SubtestHistory,
    TierFeed,
    incarnation,
)
from stream_app.core.window import WindowEntry

DESIGN = CoreConfig().drop_design
RATIOS = odds_ratios(DESIGN)


def factors_of(order: list[tuple[bool, float]]) -> list[list[float]]:
    """Each run's e-values, the runs of one subtest in `order`."""
    history, out = SubtestHistory(), []
    for passed, score in order:
        out.append(history.factors(passed, score, RATIOS))
        history = history.add(passed, score)
    return out


@pytest.mark.parametrize(
    ("runs", "positions"),
    [
        ([(True, 0.9), (True, 0.8), (False, 0.2), (True, 0.95), (False, 0.4), (True, 0.7)], {5}),
        (
            [(True, 0.9), (True, 0.8), (False, 0.2), (True, 0.95), (False, 0.4), (True, 0.7)],
            {2, 4, 5},
        ),
        ([(False, 0.1), (False, 0.3), (True, 1.0), (False, 0.0), (False, 0.5)], {0, 1, 2, 3, 4}),
        (
            [
                (True, 0.99),
                (True, 0.97),
                (True, 0.9),
                (True, 0.91),
                (False, 0.6),
                (True, 0.9),
                (True, 0.5),
            ],
            {3, 6},
        ),
    ],
)
def test_every_product_over_fixed_runs_has_mean_one_over_every_order(
    runs: list[tuple[bool, float]], positions: set[int]
) -> None:
    """Exchangeable runs are each order of the history with the same chance: the mean over
    every order is the e-value's expectation, exactly 1 for each bet."""
    totals = [0.0] * SIZE
    orders = list(itertools.permutations(runs))
    for order in orders:
        factors = factors_of(list(order))
        for i in range(SIZE):
            totals[i] += math.prod(factors[r][i] for r in positions)
    for total in totals:
        assert total / len(orders) == pytest.approx(1.0, rel=1e-12)


def test_floored_evidence_is_never_above_the_e_value() -> None:
    history = SubtestHistory()
    rnd = random.Random(1)
    for _ in range(200):
        passed, score = rnd.random() < 0.7, rnd.random()
        for units, e in zip(
            history.bet(passed, score, RATIOS), history.factors(passed, score, RATIOS), strict=True
        ):
            assert units / LOG_UNIT <= math.log(e) < (units + 1) / LOG_UNIT
        history = history.add(passed, score)


@given(
    st.lists(st.tuples(st.booleans(), st.floats(0.0, 1.0)), max_size=12),
    st.booleans(),
    st.floats(0.0, 1.0),
)
def test_a_step_is_the_bet_and_the_add_of_one_run(
    history_runs: list[tuple[bool, float]], passed: bool, score: float
) -> None:
    """The hot path's `step` (the run's tilts made once) equals `add` and `bet` made apart."""
    history = SubtestHistory()
    for before in history_runs:
        history = history.add(*before)
    assert history.step(passed, score, RATIOS) == (
        history.add(passed, score),
        history.bet(passed, score, RATIOS),
    )


def test_a_subtests_first_run_and_a_subtest_that_never_changes_prove_nothing() -> None:
    assert SubtestHistory().bet(False, 0.0, RATIOS) == (0,) * SIZE
    assert SubtestHistory().bet(True, 1.0, RATIOS) == (0,) * SIZE
    always = SubtestHistory()
    for _ in range(50):
        assert always.bet(True, 0.9, RATIOS) == (0,) * SIZE
        always = always.add(True, 0.9)


@pytest.mark.parametrize("rate", [0.05, 0.5, 0.95])
def test_stationary_subtests_lose_evidence_and_a_fall_gains_it(rate: float) -> None:
    """Over 40 runs after 60, the log evidence is negative on average for an unchanged subtest
    at any pass rate, and positive when the odds of passing fall to a third."""
    rnd = random.Random(int(rate * 100))
    fallen = rate * 0.33 / (1 - rate + rate * 0.33)
    unchanged: list[float] = []
    fell: list[float] = []
    for _ in range(300):
        for p_after, out in ((rate, unchanged), (fallen, fell)):
            history, total = SubtestHistory(), 0
            for k in range(100):
                passed = rnd.random() < (rate if k < 60 else p_after)
                score = min(1.0, max(0.0, rnd.gauss(0.85 if passed else 0.3, 0.1)))
                if k >= 60:
                    total += history.bet(passed, score, RATIOS)[0]
                history = history.add(passed, score)
            out.append(total / LOG_UNIT)
    assert statistics.mean(unchanged) < 0
    assert statistics.mean(fell) > 0.5 if 0.1 < rate < 0.9 else statistics.mean(fell) > 0


def entry(run_id: str, stratum: str = "", passed: bool = True, suite: str = "agent") -> WindowEntry:
    return WindowEntry(
        1_000_000, run_id, float(passed), 0.9, 0.1, 10.0, 0.1, 0.8, stratum=stratum, suite=suite
    )


def test_the_feed_keeps_its_incarnation_its_suites_and_bounded_subtests() -> None:
    feed = TierFeed()
    for k in range(MAX_STRATA + 3):
        feed, evidence = feed.observe(
            entry(f"r{k}", f"s{k}", suite=f"suite-{k % (MAX_SUITES + 2)}"), RATIOS
        )
        assert evidence == (0,) * SIZE  # a subtest's first run
    assert feed.epoch == incarnation("r0", 1_000_000) != 0
    assert len(feed.subtests) == MAX_STRATA
    assert len(feed.suites) == MAX_SUITES
    assert TierFeed.from_state(feed.to_state()) == feed


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(e=-1),
        lambda d: d.update(e=2**63),  # no incarnation is; a suite message would refuse it
        lambda d: d.update(s=["a", "a"]),
        lambda d: d["h"].append(d["h"][0]),
        lambda d: d["h"][0].__setitem__(2, d["h"][0][1] + 1),  # more passes than runs
        lambda d: d["h"][0].__setitem__(3, 0),  # tilt sums no scores make
        lambda d: d.update(
            h=[["x", 1, 1, 1, 1]] * 0
            + [[chr(1) * 200, 1, 1, 2**40, 2**40, 2**40]] * 1
            + [[chr(2) * 200 + str(k), 1, 1, 2**40, 2**40, 2**40] for k in range(30)]
        ),
    ],
)
def test_a_stored_feed_no_history_makes_is_refused(change: object) -> None:
    feed = TierFeed()
    for k in range(3):
        feed, _ = feed.observe(entry(f"r{k}", "00", passed=k != 1), RATIOS)
    data = feed.to_state()
    assert callable(change)
    change(data)
    with pytest.raises(ValueError, match="suite feed"):
        TierFeed.from_state(data)


def test_a_feed_at_its_bounds_fits_its_stated_size() -> None:
    """Names of control characters (six bytes a character stored), suites of 200 of them, and
    counts as large as they come: MAX_FEED_BYTES, which the settings check against the broker."""
    from stream_app.core.drop_detector import MAX_STRATA
    from stream_app.core.suite.evidence import MAX_FEED_BYTES

    feed = TierFeed()
    for k in range(MAX_STRATA * 4):
        run = entry(f"r{k}", chr(1 + k % 30) * 196 + f"{k:04d}", suite=chr(2) * 196 + f"{k:04d}")
        feed, _ = feed.observe(run, RATIOS)
    assert len(feed.suites) == MAX_SUITES
    huge = SubtestHistory(2**53, 2**53, (2**93,) * 3)
    feed = TierFeed(dict.fromkeys(feed.subtests, huge), 2**63 - 1, feed.suites)
    import json

    stored = len(json.dumps(feed.to_state(), ensure_ascii=False, separators=(",", ":")).encode())
    assert stored <= MAX_FEED_BYTES
