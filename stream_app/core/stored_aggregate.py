"""A tier's stored aggregate: the aggregate published from a tier state, kept in the state's
changelog record with what made it (`fingerprint`: the aggregate format and the core's settings).
A restarted worker restores a tier's gauges from it as stored, without decoding the state and
aggregating it again (about 0.4 ms a tier on a 2-core Xeon); one made otherwise (after an
upgrade that changed the format, or a change of settings) is derived again and re-published.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from stream_app.core.compact_json import dumps
from stream_app.core.config import CoreConfig

MADE_BY: Final = "made"
AGGREGATE: Final = "agg"

AGGREGATE_FORMAT: Final = 1
"""The version of what a tier's aggregate is made of and how its bytes are written: raised by
any change of the core, the schemas or a dependency that changes a published aggregate's bytes
(tests/core/test_stored_aggregate.py pins one aggregate's bytes, so such a change is seen)."""


def fingerprint(config: CoreConfig, made: str = str(AGGREGATE_FORMAT)) -> str:
    """What made an output besides its state: `made`, the output's kind and format version (a
    tier aggregate's is AGGREGATE_FORMAT alone, as stored aggregates were made), and the core's
    settings (a service's settings beyond them change no output)."""
    core = config.model_dump_json(include=set(CoreConfig.model_fields))
    return hashlib.sha256(f"{made}\0{core}".encode()).hexdigest()[:32]


def with_aggregate(state_json: bytes, aggregate_json: bytes, made_by: str) -> bytes:
    """A stored tier state (a JSON object, as `TierState.to_json` writes it) carrying the
    aggregate made from it, as a string: its bytes come back exactly as published."""
    if not state_json.endswith(b"}") or state_json == b"{}":
        raise ValueError("a tier state is a JSON object with fields")
    extra = dumps({MADE_BY: made_by, AGGREGATE: aggregate_json.decode()})
    return state_json[:-1] + b"," + extra[1:]


def stored_aggregate(record: Any, made_by: str) -> bytes | None:
    """The aggregate a decoded tier record carries, as published, if `made_by` made it."""
    if not isinstance(record, dict) or record.get(MADE_BY) != made_by:
        return None
    aggregate = record.get(AGGREGATE)
    try:
        return aggregate.encode() if isinstance(aggregate, str) else None
    except UnicodeEncodeError:  # a lone surrogate: no aggregate this code wrote
        return None
