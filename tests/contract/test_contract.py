"""The RunCompleted contract, field by field, and the exported JSON Schemas."""

import json
import math
from typing import Any

import pytest

from schemas import RunCompleted, Statistics
from schemas.export import main as export_main
from schemas.export import render
from stream_app.core.ingest import Rejection, parse_run
from tests.helpers import encode, make_event

LIMIT = 1024 * 1024


def reject_reason(event: Any) -> str | None:
    raw = event if isinstance(event, bytes) else encode(event)
    result = parse_run(raw, LIMIT)
    return result.reason if isinstance(result, Rejection) else None


def with_field(path: str, value: Any) -> dict[str, Any]:
    event = make_event()
    *parents, leaf = path.split(".")
    node = event
    for p in parents:
        node = node[p]
    if value is ...:
        del node[leaf]
    else:
        node[leaf] = value
    return event


def test_real_sample_event_is_accepted() -> None:
    assert reject_reason(make_event()) is None


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("schema_version", 2),
        ("run_id", ""),
        ("run_id", "x" * 201),
        ("run_id", ...),
        ("experiment_id", ""),
        ("tier", "t1"),
        ("tier", "T100"),
        ("tier", "T01"),  # one spelling per tier: else a tier apart from T1
        ("tier", "T00"),
        ("tier", "T"),
        ("tier", "Tier1"),
        ("tier", ...),
        ("model", ...),
        ("run_number", 0),
        ("passed", 1),
        ("passed", "true"),
        ("passed", None),
        ("passed", ...),
        ("judgment.summary.weighted_score", -0.1),
        ("judgment.summary.weighted_score", 1.0001),
        ("judgment.summary.weighted_score", "0.5"),
        ("judgment", ...),
        ("tokens.input", -1),
        ("tokens.output", "200"),
        ("tokens.cache_read", 1.5),
        ("tokens.input", 2**64),
        ("tokens", ...),
        ("cost_usd", -0.01),
        ("cost_usd", "0.5"),
        ("started_at", "2026-01-05T09:00:00"),
        ("completed_at", "2026-01-05 09:01:00"),
        ("completed_at", 1767603660),
        ("completed_at", "2026-01-05T08:59:59Z"),
        ("started_at", ...),
        ("code", {"candidate": "x = 1"}),
        ("code", {"candidate": "x" * 200_001, "reference": "x"}),
        ("code", {"candidate": "é" * 100_001, "reference": "x"}),  # 200,002 UTF-8 bytes
        ("code", {"candidate": "x", "reference": "y", "language": "Python 3"}),
        ("tests", {"passed": -1, "failed": 0}),
        ("tests", {"passed": "3", "failed": 0}),
        ("tests", {"passed": 1}),
    ],
)
def test_invalid_field_is_a_schema_rejection(path: str, value: Any) -> None:
    assert reject_reason(with_field(path, value)) == "schema"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("schema_version", ...),
        ("experiment_id", ...),
        ("subtest", ...),
        ("run_number", ...),
        ("tokens.cache_creation", ...),
        ("tokens.cache_read", ...),
        ("cost_usd", ...),
        ("judgment.summary.weighted_score", 0),
        ("judgment.summary.weighted_score", 1),
        ("tier", "T10"),
        ("completed_at", "2026-01-05T09:00:00Z"),
        ("started_at", "2026-01-05T10:00:00+01:00"),
        ("unknown_extra", {"anything": [1, 2]}),
        ("code", {"candidate": "x = 1", "reference": "x = 2"}),
        ("code", {"candidate": "int x;", "reference": "int y;", "language": "c"}),
        ("tests", {"passed": 3, "failed": 1}),
        ("tests", {"passed": 0, "failed": 0, "errors": 0, "skipped": 4}),
    ],
)
def test_optional_and_boundary_values_are_accepted(path: str, value: Any) -> None:
    assert reject_reason(with_field(path, value)) is None


def test_defaults() -> None:
    event = make_event(experiment_id=None, schema_version=None, cost_usd=None)
    del event["tokens"]["cache_read"]
    run = RunCompleted.model_validate_json(encode(event))
    assert run.experiment_id == "default"
    assert run.schema_version == 1
    assert run.cost_usd is None
    assert run.tokens.cache_read == 0


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"\xff\xfe\x00",
        b'{"run_id": "a", ',
        b'{"run_id": "\xc3\x28"}',
        b"",
        b"[" * 10_000 + b"]" * 10_000,
    ],
)
def test_invalid_json(raw: bytes) -> None:
    assert reject_reason(raw) == "invalid_json"


@pytest.mark.parametrize("raw", [b"[1, 2]", b"42", b'"text"', b"null", b"{}"])
def test_valid_json_that_is_not_an_event_is_a_schema_rejection(raw: bytes) -> None:
    assert reject_reason(raw) == "schema"


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_non_finite_numbers_are_rejected_not_clamped(literal: bytes) -> None:
    raw = encode(make_event()).replace(b'"weighted_score": 0.85', b'"weighted_score": ' + literal)
    assert literal in raw
    assert reject_reason(raw) == "schema"
    raw = encode(make_event()).replace(b'"cost_usd": 0.5', b'"cost_usd": ' + literal)
    assert reject_reason(raw) == "schema"


def test_too_large_is_checked_before_parsing() -> None:
    raw = encode(make_event(subtest="x" * 100))
    assert isinstance(parse_run(raw, len(raw)), RunCompleted)
    result = parse_run(raw, len(raw) - 1)
    assert isinstance(result, Rejection)
    assert result.reason == "too_large"
    assert result.detail == {"size": len(raw), "limit": len(raw) - 1}


def test_schema_rejection_detail_is_pydantics_error_list() -> None:
    result = parse_run(encode(with_field("passed", 1)), LIMIT)
    assert isinstance(result, Rejection)
    assert result.detail[0]["loc"] == ["passed"]
    assert result.detail[0]["type"] == "bool_type"
    json.dumps(result.detail)  # serializable as is


def test_infinity_is_written_as_a_string_and_read_back() -> None:
    s = Statistics(
        median=1.0, mean=math.inf, mode=1.0, min=1.0, max=math.inf, std_dev=math.inf, count=2
    )
    text = s.model_dump_json()
    assert '"mean":"Infinity"' in text
    assert "NaN" not in text
    assert Statistics.model_validate_json(text) == s


def test_exported_json_schemas_are_current() -> None:
    assert export_main(["--check"]) == 0, "run: python -m schemas.export"
    assert set(render()) == {
        "run-completed.schema.json",
        "run-metrics.schema.json",
        "run-bundle.schema.json",
        "tier-aggregate.schema.json",
        "cross-tier-report.schema.json",
        "grade-change.schema.json",
        "dead-letter.schema.json",
        "replay-report.schema.json",
        "backtest-report.schema.json",
        "api-experiment-list.schema.json",
        "api-experiment.schema.json",
        "api-suite-list.schema.json",
        "api-suite.schema.json",
        "api-error.schema.json",
        "suite-feed.schema.json",
        "suite-tier.schema.json",
        "semantic-closeness-metrics.schema.json",
        "functional-correctness-metrics.schema.json",
    }


def test_json_schema_describes_the_contract() -> None:
    schema = json.loads(render()["run-completed.schema.json"])
    assert set(schema["required"]) == {
        "run_id",
        "tier",
        "model",
        "passed",
        "judgment",
        "tokens",
        "started_at",
        "completed_at",
    }
    assert schema["properties"]["tier"]["pattern"] == "^T(?:0|[1-9][0-9]?)$"
    aggregate = json.loads(render()["tier-aggregate.schema.json"])
    mean = aggregate["$defs"]["Statistics"]["properties"]["mean"]
    assert {"type": "string", "enum": ["Infinity"]} in mean["anyOf"]


def test_every_suite_message_written_is_one_of_its_contract() -> None:
    """The suite hop's messages are written compactly by the core (no model on the hot path):
    each bundle and retirement validates against `SuiteFeedMessage`, and reads back."""
    from schemas.suite_feed import SuiteFeedMessage
    from stream_app.core.suite.message import SuiteMessage, SuiteRun, bundles

    runs = [
        SuiteRun(
            f"exp \u00e9/{k % 3}",
            2**62 + k,
            k + 1,
            1_700_000_000_000_000 + k,
            (-(2**40), 0, k, 1, 2, 3),
            k % 2 == 0,
            k / 400,
        )
        for k in range(400)
    ]
    written = [
        *bundles("agent", "T1", runs, 8 * 1024),
        SuiteMessage("agent", "T1", retired=("a", "b")).to_json(),
    ]
    assert len(written) > 2
    read: list[SuiteRun] = []
    for raw in written:
        assert len(raw) <= 8 * 1024
        model = SuiteFeedMessage.model_validate_json(raw)
        assert (model.suite, model.tier) == ("agent", "T1")
        read += SuiteMessage.from_json(raw).runs
    assert read == runs
