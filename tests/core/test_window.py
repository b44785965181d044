"""The rolling window is a pure function of the set of events: order and repetition don't matter."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_app.core.window import AddOutcome, TierWindow, WindowEntry, from_epoch_us, to_epoch_us


def entry(t: int, run_id: str, composite: float = 0.5) -> WindowEntry:
    return WindowEntry(t, run_id, 1.0, composite, 0.1, 60.0, 0.1, composite)


def test_keeps_the_newest_capacity_runs_in_order() -> None:
    w = TierWindow(3)
    for t in [5, 1, 4, 2, 3]:
        w.add(entry(t, f"r{t}"))
    assert [e.completed_at_us for e in w.entries] == [3, 4, 5]
    assert w.is_full


def test_duplicate_and_late() -> None:
    w = TierWindow(2)
    assert w.add(entry(10, "a")) is AddOutcome.ADDED
    assert w.add(entry(10, "a")) is AddOutcome.DUPLICATE
    assert w.add(entry(99, "a")) is AddOutcome.DUPLICATE  # run_id is the key, whatever the content
    assert w.add(entry(5, "b")) is AddOutcome.ADDED  # not full yet: older runs still enter
    assert w.add(entry(1, "c")) is AddOutcome.LATE
    assert w.add(entry(20, "d")) is AddOutcome.ADDED  # evicts b
    assert w.add(entry(5, "b")) is AddOutcome.LATE  # the evicted run redelivered
    assert [e.run_id for e in w.entries] == ["a", "d"]


def test_run_id_breaks_ties_of_completed_at() -> None:
    w = TierWindow(2)
    for rid in ["c", "a", "b"]:
        w.add(entry(7, rid))
    assert [e.run_id for e in w.entries] == ["b", "c"]


def test_state_round_trip_and_shrinking_capacity() -> None:
    w = TierWindow(4)
    for t in range(6):
        w.add(entry(t, f"r{t}"))
    restored = TierWindow.from_state(4, w.to_state())
    assert restored.entries == w.entries
    smaller = TierWindow.from_state(2, w.to_state())
    assert [e.run_id for e in smaller.entries] == ["r4", "r5"]


def test_epoch_micros_are_exact() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    moment = datetime(2026, 1, 5, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    us = to_epoch_us(moment)
    assert from_epoch_us(us) == moment
    assert from_epoch_us(us).tzinfo == UTC
    with pytest.raises(ValueError, match="capacity"):
        TierWindow(0)


events = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from([f"run-{i}" for i in range(30)])),
    min_size=0,
    max_size=60,
    unique_by=lambda e: e[1],  # a run_id identifies one run
)


@settings(max_examples=300)
@given(events, st.integers(1, 12), st.randoms(use_true_random=False), st.integers(0, 3))
def test_final_window_is_independent_of_order_and_redelivery(
    runs: list[tuple[int, str]], capacity: int, rnd: random.Random, repeats: int
) -> None:
    stream = [entry(t, rid) for t, rid in runs]
    # Redeliver a random part of the stream, several times, at random places.
    stream += [rnd.choice(stream) for _ in range(repeats * len(stream) // 2)] if stream else []
    rnd.shuffle(stream)
    w = TierWindow(capacity)
    outcomes = [w.add(e) for e in stream]
    expected = sorted(entry(t, rid) for t, rid in runs)[-capacity:] if runs else []
    assert list(w.entries) == expected
    assert outcomes.count(AddOutcome.ADDED) >= len(expected)
    assert len(outcomes) == len(stream)
    assert len({e.run_id for e in w.entries}) == len(w)
