"""Intervals: the textbook values, and coverage checked by seeded simulation the way people read
them (at every run, not once), plus the power to see a real 20-point difference."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_app.metrics.intervals import (
    _log_mixture,
    difference_sequence,
    mean_sequence,
    wilson_interval,
    z_of,
)
from tests.simulation_size import trials


def test_wilson_interval_matches_the_textbook() -> None:
    low, high = wilson_interval(9, 10)
    assert low == pytest.approx(0.5958, abs=1e-4)
    assert high == pytest.approx(0.9821, abs=1e-4)
    assert wilson_interval(0, 10).low == 0.0
    assert wilson_interval(10, 10).high == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert z_of(0.95) == pytest.approx(1.959964, abs=1e-6)


@given(
    runs=st.integers(1, 100_000),
    share=st.floats(0, 1),
    confidence=st.sampled_from([0.5, 0.9, 0.95, 0.99, 0.9999]),
)
def test_each_end_is_where_the_evidence_reaches_its_bound(
    runs: int, share: float, confidence: float
) -> None:
    """Newton's ends agree with the definition: the evidence is at its bound at each end (where
    the end is a float away from 0 and 1: nearer, the exact end has no float, and the one
    returned is the nearest outside it), below it just within, and the estimate is inside."""
    total = share * runs
    low, high = mean_sequence(total, runs, confidence)
    bound = math.log(1 / (1 - confidence))

    def evidence(m: float) -> float:
        like = (total * math.log(m) if total else 0.0) + (
            (runs - total) * math.log1p(-m) if runs > total else 0.0
        )
        return _log_mixture(total, runs) - like

    assert 0.0 <= low <= total / runs <= high <= 1.0
    for end, inward in ((low, 1), (high, -1)):
        if 1e-9 < end < 1 - 1e-9:
            assert evidence(end) == pytest.approx(bound, abs=1e-6)
            assert evidence(end + inward * 1e-6 * max(end * (1 - end), 1e-9)) <= bound + 1e-6
        elif 0.0 < end < 1.0:  # within a few floats of 0 or 1: at or just outside the bound
            assert evidence(end) >= bound - 1e-6


@pytest.mark.simulation
def test_a_mean_sequence_covers_at_every_run() -> None:
    """At pass rates from 5 % to 95 %: 400 tiers of 500 runs each (100 in `make test`), the 95 %
    sequence read after every run; the share of tiers it ever missed is at most 5 % (the
    promise), even with a Monte Carlo margin (the binomial sd of 400 tiers at 5 % is 1.1 %; at
    100, 2.2 %: a sequence that missed 10 % of the time would pass the quick size 6 % of runs)."""
    rnd = random.Random(11)
    tiers = trials(quick=100, full=400)
    for p in (0.05, 0.2, 0.5, 0.8, 0.95):
        missed = 0
        for _ in range(tiers):
            passes = 0
            for n in range(1, 501):
                passes += rnd.random() < p
                if n % 5 == 0:  # every fifth run: the check costs more than the run
                    low, high = mean_sequence(passes, n)
                    if not low <= p <= high:
                        missed += 1
                        break
        assert missed / tiers <= 0.05, (p, missed)


@pytest.mark.simulation
def test_a_difference_sequence_covers_at_every_run_however_runs_interleave() -> None:
    """Two tiers whose runs arrive in bursts of random length (neither alternates): the 95 %
    interval of the difference, read after every fifth run, ever missed in at most 5 % of 400
    simulated experiments (100 in `make test`) at each pair of pass rates."""
    rnd = random.Random(12)
    experiments = trials(quick=100, full=400)
    for pa, pb in ((0.5, 0.5), (0.9, 0.6), (0.1, 0.3), (0.95, 0.05)):
        missed = 0
        for _ in range(experiments):
            sums, counts = [0, 0], [0, 0]
            arm = 0
            for step in range(800):
                if rnd.random() < 0.1:
                    arm = 1 - arm
                sums[arm] += rnd.random() < (pa, pb)[arm]
                counts[arm] += 1
                if step % 5:
                    continue
                low, high = difference_sequence(sums[0], counts[0], sums[1], counts[1])
                if not low <= pa - pb <= high:
                    missed += 1
                    break
        assert missed / experiments <= 0.05, (pa, pb, missed)


def test_a_twenty_point_difference_at_400_runs_is_seen() -> None:
    """The power the intervals must have: 400 runs per tier, a true 20-point difference, and the
    experiment's six comparisons held simultaneously (each interval at 1 - 0.05/6): flagged
    significant in at least 90 % of 500 simulated experiments, at the hardest pass rates (near
    50 %, where a pass rate varies most) and at the easy ends."""
    rnd = random.Random(13)
    each = 1 - 0.05 / 6
    for pa, pb in ((0.6, 0.4), (0.7, 0.5), (0.3, 0.1), (0.95, 0.75)):
        seen = 0
        for _ in range(500):
            a = sum(rnd.random() < pa for _ in range(400))
            b = sum(rnd.random() < pb for _ in range(400))
            seen += difference_sequence(a, 400, b, 400, each).low > 0
        assert seen / 500 >= 0.9, (pa, pb, seen)


def test_a_difference_without_runs_is_anything() -> None:
    assert difference_sequence(0, 0, 5, 10) == (-1.0, 1.0)
    assert difference_sequence(100, 100, 0, 100).high == 1.0
    low, high = difference_sequence(6, 10, 4, 10)  # ten runs each: little is known
    assert low < 0 < high
