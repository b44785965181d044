"""A tier state's changelog record carries the aggregate made from it, with the fingerprint of
the code and settings that made it: the state reads back unchanged, the aggregate byte for byte,
and only under the same fingerprint."""

import json

import pytest

from stream_app.core.config import CoreConfig
from stream_app.core.stored_aggregate import fingerprint, stored_aggregate, with_aggregate
from stream_app.core.tier_state import TierState
from stream_app.core.window import WindowEntry
from stream_app.metrics.grades import GradeThresholds

CONFIG = CoreConfig()


def a_state() -> TierState:
    state = TierState.empty("exp/ü", "T1", CONFIG.window_size)
    entry = WindowEntry(
        completed_at_us=1_700_000_000_000_000,
        run_id='run "ü" \\ ✓',
        pass_rate=1.0,
        impl_rate=0.75,
        cost_usd=0.5,
        duration_seconds=12.0,
        cost_of_pass=0.5,
        composite_score=0.8,
    )
    state.apply(entry, CONFIG)
    return state


def test_the_state_reads_back_unchanged_and_the_aggregate_byte_for_byte() -> None:
    state = a_state()
    aggregate = state.aggregate(CONFIG).model_dump_json().encode()
    made_by = fingerprint(CONFIG)
    record = with_aggregate(state.to_json(), aggregate, made_by)

    again = TierState.from_json("exp/ü", "T1", CONFIG.window_size, record)
    assert again.to_json() == state.to_json()
    assert stored_aggregate(json.loads(record), made_by) == aggregate


def test_only_the_same_fingerprint_reads_the_aggregate() -> None:
    state = a_state()
    record = json.loads(with_aggregate(state.to_json(), b'{"runs":1}', "made by one build"))
    assert stored_aggregate(record, "made by one build") == b'{"runs":1}'
    assert stored_aggregate(record, "made by another") is None
    assert stored_aggregate(json.loads(state.to_json()), "made by one build") is None  # none
    assert stored_aggregate({"made": "x", "agg": {"runs": 1}}, "x") is None  # not a string
    assert stored_aggregate(["made", "x"], "x") is None


def test_the_fingerprint_follows_every_setting_of_the_core() -> None:
    base = fingerprint(CONFIG)
    assert fingerprint(CoreConfig()) == base
    assert fingerprint(CoreConfig(window_size=5)) != base
    assert fingerprint(CoreConfig(grade_thresholds=GradeThresholds(A=0.9))) != base
    assert fingerprint(CoreConfig(baseline_tier="T1")) != base


def test_a_record_is_a_json_object_with_fields() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        with_aggregate(b"{}", b"{}", "x")
    with pytest.raises(ValueError, match="JSON object"):
        with_aggregate(b"[1]", b"{}", "x")
