"""The contract's timestamp: RFC 3339 `date-time`, strictly, within a range where every conversion
is total.

pydantic's own datetime parser is lenient: it takes epoch numbers in strings ("1767603660"), a
space for the `T`, and seconds left out. The contract promises RFC 3339, so a timestamp is
checked against the grammar first (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, `T`/`t` and `Z`/`z`
both allowed, seconds required), then parsed. The instant must lie in [1970-01-01, 9999-01-01) UTC
(`MIN_UTC`, `MAX_UTC`): inside it, shifting by any offset, converting to epoch microseconds and
back never leaves Python's datetime range, so no later step can overflow.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

RFC3339_PATTERN: Final = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
_RFC3339: Final = re.compile(RFC3339_PATTERN)
MIN_UTC: Final = datetime(1970, 1, 1, tzinfo=UTC)
MAX_UTC: Final = datetime(9999, 1, 1, tzinfo=UTC)
"""Timestamps are accepted in [MIN_UTC, MAX_UTC): years 1970 to 9998 once converted to UTC."""


_RANGE_ERROR: Final = "timestamp must lie in 1970-01-01T00:00:00Z .. 9998-12-31T23:59:59Z"


def _in_range(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("timestamp needs a UTC offset (Z or ±HH:MM)")
    # Comparing aware datetimes never converts them, so this cannot overflow even at year 9999.
    if not MIN_UTC <= moment < MAX_UTC:
        raise ValueError(_RANGE_ERROR)
    return moment


def parse_timestamp(value: Any) -> datetime:
    """An RFC 3339 `date-time` string (or an aware datetime, from Python) within the range."""
    if isinstance(value, datetime):
        return _in_range(value)
    if not isinstance(value, str):
        raise ValueError("timestamp must be an RFC 3339 date-time string")
    if not _RFC3339.fullmatch(value):  # fullmatch: `$` alone would allow a final newline
        raise ValueError(
            "timestamp must be RFC 3339: YYYY-MM-DDTHH:MM:SS[.fraction] then Z or ±HH:MM"
        )
    text = value.upper()
    if text[-6] in "+-" and (int(text[-5:-3]) > 23 or int(text[-2:]) > 59):
        raise ValueError(f"timestamp offset {text[-6:]} is out of range")
    try:
        moment = datetime.fromisoformat(text)  # fraction digits past the 6th are cut
    except ValueError as exc:
        raise ValueError(f"timestamp is not a valid date-time: {exc}") from None
    return _in_range(moment)


def format_timestamp(moment: datetime) -> str:
    """As pydantic writes datetimes: ISO 8601, `Z` for UTC, microseconds only when not 0."""
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


Timestamp = Annotated[
    datetime,
    PlainValidator(parse_timestamp),
    PlainSerializer(format_timestamp, return_type=str, when_used="json"),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "pattern": RFC3339_PATTERN,
            "description": "RFC 3339 date-time with an offset (Z or ±HH:MM), seconds required, "
            "in 1970-01-01T00:00:00Z .. 9998-12-31T23:59:59Z once converted to UTC.",
        },
        mode="validation",
    ),
]
"""An RFC 3339 timestamp with an offset, within [MIN_UTC, MAX_UTC)."""
