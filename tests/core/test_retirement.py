"""The retirement rule: experiments idle for longer than the TTL, by whichever clock."""

from hypothesis import given
from hypothesis import strategies as st

from stream_app.core.retirement import US_PER_S, IdleClock


def test_an_experiment_is_idle_once_its_last_run_is_older_than_the_ttl() -> None:
    clock = IdleClock(ttl_s=10)
    clock.touch("a", 0)
    clock.touch("b", 5 * US_PER_S)
    clock.touch("a", 8 * US_PER_S)  # a's latest run
    assert not clock.due(15 * US_PER_S)
    assert clock.idle(15 * US_PER_S) == []
    assert clock.due(15 * US_PER_S + 1)
    assert clock.idle(15 * US_PER_S + 1) == ["b"]
    assert clock.idle(18 * US_PER_S + 1) == ["a"]
    assert clock.last == {}  # forgotten: the caller retires them
    assert clock.idle(10**12) == []


def test_an_earlier_touch_does_not_move_an_experiment_back() -> None:
    clock = IdleClock(ttl_s=1)
    clock.touch("a", 5 * US_PER_S)
    clock.touch("a", 1 * US_PER_S)
    assert clock.idle(6 * US_PER_S) == []
    assert clock.idle(6 * US_PER_S + 1) == ["a"]


def test_a_ttl_of_zero_never_retires() -> None:
    clock = IdleClock(ttl_s=0)
    clock.touch("a", 0)
    assert not clock.due(10**15)
    assert clock.idle(10**15) == []
    assert clock.last == {"a": 0}


def test_forgotten_experiments_are_not_retired() -> None:
    clock = IdleClock(ttl_s=1)
    clock.touch("a", 0)
    clock.forget("a")
    assert not clock.due(10**12)
    assert clock.idle(10**12) == []


def test_the_heap_stays_bounded_under_many_touches_of_one_experiment() -> None:
    clock = IdleClock(ttl_s=1)
    for t in range(100_000):
        clock.touch("a", t)
    assert len(clock._heap) <= 2 * len(clock.last) + 1025
    assert clock.idle(99_999 + US_PER_S + 1) == ["a"]


@given(st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 100)), max_size=60))
def test_idle_is_exactly_the_experiments_whose_latest_touch_is_before_the_cutoff(
    touches: list[tuple[str, int]],
) -> None:
    clock = IdleClock(ttl_s=50 / US_PER_S)  # 50 µs
    for experiment, at in touches:
        clock.touch(experiment, at)
    latest: dict[str, int] = {}
    for experiment, at in touches:
        latest[experiment] = max(latest.get(experiment, at), at)
    now = 120
    expected = {e for e, at in latest.items() if at < now - 50}
    assert clock.due(now) == bool(expected)
    assert set(clock.idle(now)) == expected
    assert set(clock.last) == set(latest) - expected
