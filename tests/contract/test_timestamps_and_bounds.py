"""Issue 9: strict RFC 3339 timestamps within a total range, and sane upper bounds."""

import json
import re
from typing import Any

import pytest

from schemas.export import JSON_DIR
from stream_app.core.ingest import Rejection, parse_run
from tests.helpers import encode, make_event

LIMIT = 1024 * 1024


def outcome(**fields: Any) -> str:
    result = parse_run(encode(make_event(**fields)), LIMIT)
    return result.reason if isinstance(result, Rejection) else "accepted"


@pytest.mark.parametrize(
    "stamp",
    [
        "1767603660",  # epoch seconds in a string
        "1767603660000",  # epoch milliseconds
        "0",
        "2026-01-05 09:01:00Z",  # space for T
        "2026-01-05T09:01Z",  # no seconds
        "2026-01-05T09:01:00",  # no offset
        "2026-01-05T09:01:00+0100",  # offset without colon
        "2026-01-05T09:01:00+24:00",  # offset out of range
        "2026-01-05T09:01:00+05:60",
        "2026-01-05T09:01:60Z",  # leap second: Python cannot represent it
        "2026-02-30T09:01:00Z",
        "2026-01-05T09:01:00.Z",
        "2026-01-05T09:01:00.1234567890Z",  # more than 9 fraction digits
        "20260105T090100Z",  # ISO 8601 basic format, not RFC 3339
        "2026-W02-1T09:01:00Z",
        "0001-01-01T00:00:00+14:00",  # overflowed the epoch conversion
        "9999-12-31T23:59:59-12:00",
        "1969-12-31T23:59:59Z",
        "1970-01-01T00:30:00+01:00",  # 1969 in UTC
        "9998-12-31T23:00:00-01:00",  # 9999 in UTC
        " 2026-01-05T09:01:00Z",
        "2026-01-05T09:01:00Z\n",
    ],
)
def test_loose_or_out_of_range_timestamps_are_schema_rejections(stamp: str) -> None:
    assert outcome(started_at=stamp, completed_at=stamp) == "schema", stamp


@pytest.mark.parametrize("number", [1767603660, 0, 1.5])
def test_json_numbers_are_not_timestamps(number: float) -> None:
    assert outcome(started_at=number, completed_at=number) == "schema"


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-01-05T09:01:00Z",
        "2026-01-05t09:01:00z",  # RFC 3339 allows lower case
        "2026-01-05T09:01:00.123456789Z",  # fractions past microseconds are cut
        "2026-01-05T09:01:00+05:30",
        "2026-01-05T09:01:00-00:00",
        "1970-01-01T00:00:00Z",  # the first instant
        "1970-01-01T00:30:00-01:00",
        "9998-12-31T23:59:59.999999Z",  # the last
        "9998-12-31T23:59:59+14:00",
        "1969-12-31T23:59:59-00:01",  # 1970-01-01T00:00:59Z: the range is in UTC
        "9999-01-01T00:30:00+01:00",  # 9998-12-31T23:30:00Z
    ],
)
def test_rfc3339_timestamps_in_range_are_accepted(stamp: str) -> None:
    assert outcome(started_at="1970-01-01T00:00:00Z", completed_at=stamp) == "accepted", stamp
    # The exported JSON Schema, which producers in other languages use, agrees.
    assert re.search(json_schema_pattern(), stamp)


def json_schema_pattern() -> str:
    doc = json.loads((JSON_DIR / "run-completed.schema.json").read_text())
    field = doc["properties"]["completed_at"]
    assert field["format"] == "date-time"
    pattern: str = field["pattern"]
    return pattern


def test_bounds_on_costs_and_counts() -> None:
    assert outcome(cost_usd=1_000_000.0) == "accepted"
    assert outcome(cost_usd=1_000_000.01) == "schema"
    assert outcome(cost_usd=1e155) == "schema"
    tokens = {"input": 10**12, "output": 0}
    assert outcome(tokens=tokens) == "accepted"
    assert outcome(tokens={"input": 10**12 + 1, "output": 0}) == "schema"
    assert outcome(run_number=10**12 + 1) == "schema"
