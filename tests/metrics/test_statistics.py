import math
import statistics as stdlib_stats

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from stream_app.metrics.statistics import (
    compute_statistics,
    mean,
    median,
    mode,
    population_variance,
    std_dev,
)

finite = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)


def test_seed_example_2_ten_run_aggregation() -> None:
    values = [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    s = compute_statistics(values)
    assert s.median == 1.0
    assert s.mean == pytest.approx(0.8, abs=1e-15)
    assert s.mode == 1.0
    assert (s.min, s.max, s.count) == (0.0, 1.0, 10)
    assert s.std_dev == pytest.approx(0.4, abs=1e-15)


def _mode_by_definition(values: list[float]) -> float:
    """Seed 001's mode, written as it reads: count the rounded values, the smallest of the most
    frequent."""
    rounded = [round(v, 6) for v in values]
    top = max(rounded.count(r) for r in rounded)
    return min(r for r in rounded if rounded.count(r) == top)


near_grid = st.builds(
    lambda whole, millionths, nudge: whole + millionths * 1e-6 + nudge,
    st.integers(0, 3),
    st.integers(0, 12),
    st.sampled_from([0.0, 4e-7, 5e-7, 6e-7, -4e-7, 1.5e-6, 4e-6, 4.1e-6]),
)


@given(st.lists(st.one_of(near_grid, finite, st.just(math.inf)), min_size=1, max_size=12))
@example([0.0, -0.0, 1.0])
@example([0.0, -4e-7])  # both round to zero: the first one's sign
@example([-4e-7, 0.0])
@example([0.5, 1.0000004, 0.9999996])  # 8e-7 apart, one rounded value: the mode
@example([1e10, 1e10 + 4.1e-6, 1e10 + 9e-6])
def test_mode_is_the_definition_whatever_the_spacing(values: list[float]) -> None:
    """Values 4e-6 apart skip the rounding: that shortcut must give the definition's answer for
    values that round together, apart, or at the edge of the gap."""
    got, expected = mode(values), _mode_by_definition(values)
    assert got == expected
    assert math.copysign(1, got) == math.copysign(1, expected)


@given(st.lists(st.sampled_from([0.0, -0.0, 4e-7, -4e-7, 1.0]), min_size=1, max_size=8))
def test_min_and_max_are_the_first_of_equal_values(values: list[float]) -> None:
    """The statistics sort once, yet min and max stay what `min` and `max` give: the first of
    equal values, so 0.0 and -0.0 keep their order's sign."""
    s = compute_statistics(values)
    assert repr(s.min) == repr(min(values))
    assert repr(s.max) == repr(max(values))


def test_median_odd_and_even() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.0]) == 7.0


def test_mode_rounds_to_six_decimals_and_takes_smallest_tie() -> None:
    assert mode([0.1234564, 0.1234561, 0.9]) == 0.123456
    assert mode([3.0, 2.0, 3.0, 2.0, 5.0]) == 2.0
    assert mode([0.5, 0.25, 0.75]) == 0.25


def test_population_not_sample_std_dev() -> None:
    assert std_dev([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == 2.0
    assert population_variance([1.0]) == 0.0


def test_infinity_propagates_without_nan() -> None:
    s = compute_statistics([0.5, math.inf, 0.25, math.inf])
    assert s.mean == math.inf
    assert s.std_dev == math.inf
    assert s.median == math.inf  # (0.5 + inf) / 2
    assert s.min == 0.25
    assert s.max == math.inf
    assert s.mode == math.inf  # inf appears twice
    all_inf = compute_statistics([math.inf, math.inf])
    assert (all_inf.median, all_inf.mean, all_inf.std_dev) == (math.inf, math.inf, math.inf)
    assert not any(math.isnan(v) for v in all_inf.model_dump().values())


def test_odd_count_with_infinity_in_upper_half() -> None:
    s = compute_statistics([0.1, 0.2, math.inf])
    assert s.median == 0.2
    assert s.mean == math.inf


@pytest.mark.parametrize("fn", [median, mean, mode, std_dev, compute_statistics])
def test_empty_input_is_an_error(fn: object) -> None:
    with pytest.raises(ValueError, match="no values"):
        fn([])  # type: ignore[operator]


def test_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        compute_statistics([0.1, math.nan])


def test_constant_values_have_exactly_zero_spread() -> None:
    s = compute_statistics([0.1] * 10)
    assert s.mean == 0.1
    assert s.std_dev == 0.0


@given(st.lists(finite, min_size=1, max_size=30), st.randoms())
def test_order_does_not_change_any_statistic(values: list[float], rnd: object) -> None:
    shuffled = list(values)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert compute_statistics(values) == compute_statistics(shuffled)


@given(st.lists(finite, min_size=1, max_size=30))
def test_agrees_with_the_standard_library(values: list[float]) -> None:
    s = compute_statistics(values)
    assert s.median == pytest.approx(stdlib_stats.median(values), rel=1e-12, abs=1e-12)
    assert s.mean == pytest.approx(stdlib_stats.fmean(values), rel=1e-12, abs=1e-9)
    assert s.std_dev == pytest.approx(stdlib_stats.pstdev(values), rel=1e-9, abs=1e-6)
    assert s.min <= s.mean <= s.max
    assert s.std_dev >= 0


# Issue 9: the statistics are total. Floats from the whole finite range (both signs, subnormals,
# the largest doubles) and +inf: never an exception, never NaN, and the order of the values
# never matters.
whole_range = st.floats(allow_nan=False, allow_infinity=False) | st.just(math.inf)


@given(st.lists(whole_range, min_size=1, max_size=40))
def test_statistics_are_total_over_the_whole_float_range(values: list[float]) -> None:
    s = compute_statistics(values)
    fields = (s.median, s.mean, s.mode, s.min, s.max, s.std_dev)
    assert not any(math.isnan(v) for v in fields), s
    assert s.min <= s.median <= s.max
    assert s.min <= s.mean <= s.max
    assert s.std_dev >= 0
    if math.inf in values:
        assert s.mean == math.inf
        assert s.std_dev == math.inf
    variance = population_variance(values)
    assert not math.isnan(variance)
    assert variance >= 0
    assert compute_statistics(list(reversed(values))) == s


@pytest.mark.parametrize(
    ("values", "std"),
    [
        ([0.0, 1e155], 5e154),  # (v - mu) ** 2 raised OverflowError
        ([1.7e308, 1.7e308], 0.0),  # the sum passes 1.8e308: fsum raised OverflowError
        ([-1.7e308, 1.7e308], 1.7e308),
        ([1.5e308, 1e308, 0.0], None),
    ],
)
def test_values_whose_sums_or_squares_overflow(values: list[float], std: float | None) -> None:
    s = compute_statistics(values)
    assert math.isfinite(s.mean)
    assert math.isfinite(s.std_dev)
    if std is not None:
        assert s.std_dev == pytest.approx(std, rel=1e-15)
    # The variance itself exceeds the float range: +inf, as the contract allows.
    assert population_variance([0.0, 1e300]) == math.inf
    assert std_dev([0.0, 1e300]) == pytest.approx(5e299, rel=1e-15)


@example([48576.127606303664, 999999.9999999999, 5e-324])  # a subnormal value keeps its bits
@given(st.lists(finite, min_size=1, max_size=30))
def test_scaling_changes_no_bit_of_ordinary_results(values: list[float]) -> None:
    """The power-of-two scaling is exact: the same bits as the plain formulas give."""
    plain_mean = min(max(math.fsum(values) / len(values), min(values)), max(values))
    if min(values) == max(values):
        plain_mean = values[0]
    assert mean(values) == plain_mean
    if min(values) != max(values):
        plain_var = math.fsum((v - plain_mean) ** 2 for v in values) / len(values)
        assert population_variance(values) == pytest.approx(plain_var, rel=1e-15, abs=0)
