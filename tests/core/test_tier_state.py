"""Grade changes: emitted only between full windows whose grades differ, deterministic."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stream_app.core.config import CoreConfig
from stream_app.core.keys import split_tier_key, tier_key
from stream_app.core.replay import Replay
from stream_app.core.tier_state import TierState
from stream_app.core.window import AddOutcome, WindowEntry, to_epoch_us

CONFIG = CoreConfig(window_size=3)
DATA = Path(__file__).parents[1] / "data"
BUNDLED = Path(__file__).parents[2] / "stream_app" / "data" / "scylla-runs.jsonl"
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


def test_unpriced_runs_round_trip_and_only_their_costs_may_be_null() -> None:
    """An unpriced run's costs are stored as null and load back; a null anywhere else (a rate,
    the duration, the composite) is a corrupt state, refused."""
    state = TierState.empty("e", "T1", CONFIG.window_size)
    state.apply(run(0, True), CONFIG)
    state.apply(run(1, True)._replace(cost_usd=None, cost_of_pass=None), CONFIG)
    again = TierState.from_json("e", "T1", CONFIG.window_size, state.to_json())
    assert again.window.entries == state.window.entries
    aggregate = again.aggregate(CONFIG)
    assert aggregate.cost_usd is not None
    assert aggregate.cost_usd.count == 1
    data = json.loads(state.to_json())
    for field in (2, 3, 5, 7):  # pass rate, impl rate, duration, composite
        row = list(data["window"][0])
        row[field] = None
        bad = {**data, "window": [row, *data["window"][1:]]}
        with pytest.raises(ValueError, match="not a number"):
            TierState.from_json("e", "T1", CONFIG.window_size, json.dumps(bad).encode())


def test_a_state_of_a_format_no_release_wrote_is_refused() -> None:
    """Version 1 (before totals and drop detectors), and version 2's earlier records (one drop
    reference, rows of 10 fields, no suite feed), are refused: the stage quarantines them
    (docs/architecture.md, 'Stored formats')."""
    state = TierState.empty("e", "T1", CONFIG.window_size)
    for i in range(3):
        state.apply(run(i, True), CONFIG)
    data = json.loads(state.to_json())
    old_rows = {**data, "window": [row[:10] for row in data["window"]]}
    no_feed = {k: v for k, v in data.items() if k != "feed"}
    for bad in ({**data, "v": 1}, old_rows, no_feed):
        with pytest.raises(ValueError, match="tier state"):
            TierState.from_json("e", "T1", CONFIG.window_size, json.dumps(bad).encode())


def test_totals_count_accepted_runs_once_and_the_page_is_on_its_step() -> None:
    config = CoreConfig(window_size=3, drop_warmup_runs=10)
    state = TierState.empty("e", "T1", config.window_size)
    pages = []
    for i in range(200):
        step = state.apply(run(i, i < 100), config)
        if step.page:
            pages.append((i, step.page))
    assert state.apply(run(199, False), config).outcome is AddOutcome.DUPLICATE
    assert state.apply(run(0, True), config).outcome is AddOutcome.LATE
    assert state.totals.runs == 200
    assert state.totals.passes == 100
    [(at, detector)] = pages
    assert 100 <= at < 110
    assert detector == "pass_rate"
    agg = state.aggregate(config)
    assert agg.drop.dropped
    assert agg.cumulative.runs == 200
    assert agg.cumulative.pass_rate_interval.low < 0.5 < agg.cumulative.pass_rate_interval.high


def test_a_version_2_state_that_no_runs_make_is_refused() -> None:
    state = TierState.empty("e", "T1", CONFIG.window_size)
    for i in range(3):
        state.apply(run(i, True), CONFIG)
    data = json.loads(state.to_json())
    for bad in ({**data, "totals": [2, 2, 0]}, {k: v for k, v in data.items() if k != "detect"}):
        with pytest.raises(ValueError, match="tier state"):
            TierState.from_json("e", "T1", CONFIG.window_size, json.dumps(bad).encode())


def test_a_run_joins_its_reference_only_after_leaving_the_window() -> None:
    """A drop's first window of runs is measured against a reference none of them is in."""
    config = CoreConfig()
    state = TierState.empty("e", "T1", config.window_size)
    at = 1_767_225_600_000_000
    for i in range(300):
        entry = WindowEntry(at + i, f"good-{i:04d}", 1.0, 0.9, 0.1, 5.0, 0.1, 0.9, stratum="a")
        state.apply(entry, config, with_aggregate=False)
    learned = state.drop.reference
    assert learned.runs == 300 - config.window_size
    for i in range(config.window_size):
        entry = WindowEntry(
            at + 1000 + i, f"bad-{i:04d}", 0.0, 0.1, 0.1, 5.0, float("inf"), 0.1, stratum="a"
        )
        state.apply(entry, config, with_aggregate=False)
    after = state.drop.reference
    assert after.runs == 300  # the good runs the bad ones pushed out, and no bad one
    assert after.passes == 300
    raw = state.to_json()
    again = TierState.from_json("e", "T1", config.window_size, raw, config.drop_design)
    assert again.to_json() == raw
    assert [e.stratum for e in again.window.entries] == ["a"] * config.window_size


def test_stored_states_load_and_carry_on_like_a_fresh_replay() -> None:
    """Tier states stored after the first half of the bundled runs load under the current
    design, nothing refused, and the second half brings every window to where a replay of all
    the runs brings it."""
    settings = CoreConfig()
    lines = BUNDLED.read_bytes().splitlines()
    half = Replay(settings)
    half.feed_lines(lines[: len(lines) // 2])
    half.report()  # flushes the fold into the tiers
    states = {key: state.to_json() for key, state in half.tiers.items()}
    fresh = Replay(settings)
    fresh.feed_lines(lines)
    upgraded = Replay(settings)
    for key, raw in states.items():
        state = TierState.from_json(
            *split_tier_key(key), settings.window_size, raw, settings.drop_design
        )
        assert state.totals.runs >= len(state.window) > 0
        upgraded.tiers[key] = state
        upgraded.latest[key] = state.aggregate(settings)
    upgraded.feed_lines(lines[len(lines) // 2 :])
    got, want = upgraded.report(), fresh.report()
    assert len(states) == 11
    assert not got.rejected
    assert [(a.experiment_id, a.tier, a.run_ids, a.pass_rate, a.grade) for a in got.tiers] == [
        (a.experiment_id, a.tier, a.run_ids, a.pass_rate, a.grade) for a in want.tiers
    ]
    assert {(s.suite, s.tier) for s in got.suites} == {(s.suite, s.tier) for s in want.suites}
