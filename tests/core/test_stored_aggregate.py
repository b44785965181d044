"""A tier state's changelog record carries the aggregate made from it, with the fingerprint of
the format and settings that made it: the state reads back unchanged, the aggregate byte for byte,
and only under the same fingerprint."""

import hashlib
import json
from typing import Any

import pytest

from stream_app.core.config import CoreConfig
from stream_app.core.stored_aggregate import (
    AGGREGATE_FORMAT,
    fingerprint,
    stored_aggregate,
    with_aggregate,
)
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
    assert stored_aggregate({"made": "x", "agg": "\ud800"}, "x") is None  # a lone surrogate


OTHER_VALUES: dict[str, Any] = {
    "window_size": 5,
    "composite_weights": {"pass_rate": 0.7, "impl_rate": 0.3},
    "grade_thresholds": GradeThresholds(A=0.9),
    "baseline_tier": "T1",
    "pass_at_k": {"k_values": [1, 3]},
    "code_bleu": {"weights": {"ngram": 0.4, "weighted_ngram": 0.2, "ast": 0.2, "dataflow": 0.2}},
    "pricing": {"my-model": {"input": 1.0, "output": 2.0}},
    "max_message_bytes": 4096,
    "experiment_idle_ttl_s": 60,
    "drop_false_page_runs": 50_000,
    "drop_smallest_fall": 0.3,
    "drop_warmup_runs": 30,
    "drop_reference_runs": 400,
    "drop_reference_z": 2.5,
    "interval_confidence": 0.9,
}


@pytest.mark.parametrize("field", sorted(OTHER_VALUES))
def test_every_setting_of_the_core_changes_the_fingerprint(field: str) -> None:
    other = CoreConfig(**{field: OTHER_VALUES[field]})
    assert getattr(other, field) != getattr(CONFIG, field)
    assert fingerprint(other) != fingerprint(CONFIG)
    assert fingerprint(CoreConfig()) == fingerprint(CONFIG)


def test_the_list_of_settings_is_every_setting() -> None:
    assert set(OTHER_VALUES) == set(CoreConfig.model_fields), "a new setting: add it above"


PINNED: dict[int, str] = {1: "9956bb55d679942e"}
"""The sha256 (first 16 hex digits) of `a_state`'s aggregate under each aggregate format."""


def test_an_aggregate_s_bytes_change_only_with_the_format() -> None:
    """A change that alters a published aggregate's bytes must raise `AGGREGATE_FORMAT` (and
    add its digest here): restarted workers then derive their stored aggregates again instead
    of restoring gauges from bytes the code no longer makes."""
    published = a_state().aggregate(CONFIG).model_dump_json().encode()
    digest = hashlib.sha256(published).hexdigest()[:16]
    assert PINNED.get(AGGREGATE_FORMAT) == digest, "raise AGGREGATE_FORMAT, pin the new digest"
    assert fingerprint(CONFIG) == fingerprint(CoreConfig())


def test_a_record_is_a_json_object_with_fields() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        with_aggregate(b"{}", b"{}", "x")
    with pytest.raises(ValueError, match="JSON object"):
        with_aggregate(b"[1]", b"{}", "x")
