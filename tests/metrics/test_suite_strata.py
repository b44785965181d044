"""Sums kept as strata come and go are the floats made from every stratum at once: the exact
sum, the strata's histogram, and the comparison built on them (issue 43: a suite tier's
comparison is updated, not remade)."""

from __future__ import annotations

import math
import random

from hypothesis import given
from hypothesis import strategies as st

from stream_app.metrics.exact_sum import ExactSum
from stream_app.metrics.suite_comparison import equal_weight_sequence, strata_sequence
from stream_app.metrics.suite_outcomes import Stratum
from stream_app.metrics.suite_strata import SizeGroups, StrataSet

FLOATS = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(st.lists(st.tuples(st.booleans(), FLOATS), max_size=60))
def test_an_exact_sum_is_fsum_of_what_is_left_at_every_step(
    steps: list[tuple[bool, float]],
) -> None:
    total, kept = ExactSum(), list[float]()
    for take_out, value in steps:
        if take_out and kept:
            total.remove(kept.pop(0))
        else:
            total.add(value)
            kept.append(value)
        assert total.value() == math.fsum(kept)


def test_a_plain_running_sum_would_not_be() -> None:
    """Why the sums are exact: adding and taking out leaves a float sum off by rounding."""
    plain, exact = 0.0, ExactSum()
    for value in (1e16, 1.0, -1e16):
        plain += value
        exact.add(value)
    assert plain != 1.0
    assert exact.value() == 1.0


def test_the_groups_place_every_stratum_as_sorting_them_would() -> None:
    rnd = random.Random(1)
    for _ in range(100):
        runs = [rnd.randint(1, 9) for _ in range(rnd.randint(1, 30))]
        strata = StrataSet(Stratum(n, 0.0, 0.0) for n in runs)
        for descending in (True, False):
            groups = SizeGroups((strata,), descending)
            ordered = sorted(runs, reverse=descending)
            assert [groups.size_at(i) for i in range(len(runs))] == ordered
            for g, first in enumerate(groups.starts):
                assert groups.sums[g] == sum(ordered[:first])


def stratum(rnd: random.Random) -> Stratum:
    runs = rnd.randint(1, 40)
    passes = rnd.randint(0, runs)
    return Stratum(runs, float(passes), rnd.uniform(0, runs / 4))


def test_a_sequence_updated_stratum_by_stratum_is_the_one_made_at_once() -> None:
    rnd = random.Random(2)
    plus, minus = StrataSet(), StrataSet()
    kept: list[tuple[int, Stratum]] = []
    for _ in range(300):
        if kept and rnd.random() < 0.3:
            sign, gone = kept.pop(rnd.randrange(len(kept)))
            (plus if sign > 0 else minus).remove(gone)
        else:
            sign = rnd.choice((1, -1))
            kept.append((sign, stratum(rnd)))
            (plus if sign > 0 else minus).add(kept[-1][1])
        if kept:
            count = max(plus.count, minus.count, 1)
            made = equal_weight_sequence(kept, count, 0.95)
            assert strata_sequence(plus, minus, count, 0.95) == made
