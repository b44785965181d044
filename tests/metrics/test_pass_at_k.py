from fractions import Fraction
from itertools import combinations
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_app.metrics.pass_at_k import (
    calculate_pass_at_k,
    calculate_pass_at_k_for_multiple,
    mean_pass_at_k,
)


def brute_force(n: int, c: int, k: int) -> Fraction:
    """Fraction of k-subsets of n samples (c correct) containing a correct one."""
    samples = [i < c for i in range(n)]
    subsets = list(combinations(samples, k))
    return Fraction(sum(1 for s in subsets if any(s)), len(subsets))


@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_matches_enumeration_of_all_draws(args: tuple[int, int, int]) -> None:
    n, c, k = args
    assert calculate_pass_at_k(n, c, k) == float(brute_force(n, c, k))


def test_seed_shortcut_is_wrong_and_we_are_exact() -> None:
    # Seed 004 returned 1.0 whenever c >= k; with n=10, c=5, k=5 a draw of 5 can miss all 5.
    assert calculate_pass_at_k(10, 5, 5) == 1 - 1 / 252
    assert calculate_pass_at_k(10, 5, 5) < 1.0


def test_edges() -> None:
    assert calculate_pass_at_k(10, 0, 1) == 0.0
    assert calculate_pass_at_k(10, 10, 10) == 1.0
    assert calculate_pass_at_k(10, 1, 10) == 1.0  # n - c < k: every draw holds the correct one
    assert calculate_pass_at_k(10, 3, 1) == 0.3
    assert calculate_pass_at_k(200, 13, 100) == float(1 - Fraction(comb(187, 100), comb(200, 100)))


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (10, 1, 0, "k must be >= 1"),
        (5, 1, 6, "cannot exceed n_samples"),
        (5, -1, 1, ">= 0"),
        (5, 6, 1, "cannot exceed"),
    ],
)
def test_invalid_arguments(n: int, c: int, k: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        calculate_pass_at_k(n, c, k)


def test_multiple_leaves_out_k_above_n() -> None:
    scores = calculate_pass_at_k_for_multiple(
        [True, False, True, False, True], k_values=[1, 2, 3, 10]
    )
    assert set(scores) == {"pass@1", "pass@2", "pass@3"}
    assert scores["pass@1"] == pytest.approx(0.6)
    assert scores["pass@2"] == pytest.approx(0.9)
    assert scores["pass@3"] == 1.0


def test_mean_over_problems() -> None:
    assert mean_pass_at_k([(10, 0), (10, 10)], k=1) == 0.5
    with pytest.raises(ValueError, match="no problems"):
        mean_pass_at_k([], k=1)
