"""Grade changes: emitted only between full windows whose grades differ, deterministic."""

from datetime import UTC, datetime, timedelta

from stream_app.core.config import CoreConfig
from stream_app.core.keys import split_tier_key, tier_key
from stream_app.core.tier_state import TierState
from stream_app.core.window import AddOutcome, WindowEntry, to_epoch_us

CONFIG = CoreConfig(window_size=3)
T0 = to_epoch_us(datetime(2026, 1, 1, tzinfo=UTC))


def run(i: int, passed: bool) -> WindowEntry:
    p = 1.0 if passed else 0.0
    impl = 0.95 if passed else 0.1
    return WindowEntry(
        T0 + i * 1_000_000,
        f"r{i:03d}",
        p,
        impl,
        0.1,
        5.0,
        0.1 if passed else float("inf"),
        (p + impl) / 2,
    )


def test_grade_change_only_between_full_windows() -> None:
    state = TierState.empty("e", "T1", CONFIG.window_size)
    steps = [state.apply(run(i, True), CONFIG) for i in range(3)]
    assert all(s.grade_change is None for s in steps)  # first full window: nothing to compare
    assert steps[-1].aggregate is not None
    assert steps[-1].aggregate.grade == "A"
    steps = [state.apply(run(i, False), CONFIG) for i in range(3, 6)]
    changes = [s.grade_change for s in steps if s.grade_change]
    assert [(c.previous_grade, c.grade, c.direction) for c in changes] == [("A", "F", "drop")]
    change = changes[0]
    assert change.run_id == "r004"
    assert change.at == datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=4)
    rise = [state.apply(run(i, True), CONFIG).grade_change for i in range(6, 9)]
    assert [c.direction for c in rise if c] == ["rise"]


def test_duplicates_change_nothing_and_state_round_trips() -> None:
    state = TierState.empty("exp/with/slashes", "T10", CONFIG.window_size)
    for i in range(4):
        state.apply(run(i, i % 2 == 0), CONFIG)
    again = TierState.from_json("exp/with/slashes", "T10", CONFIG.window_size, state.to_json())
    assert again.window.entries == state.window.entries
    assert again.last_full_grade == state.last_full_grade
    assert again.apply(run(3, False), CONFIG).outcome is AddOutcome.DUPLICATE
    assert again.aggregate(CONFIG) == state.aggregate(CONFIG)
    assert split_tier_key(tier_key("exp/with/slashes", "T10")) == ("exp/with/slashes", "T10")
