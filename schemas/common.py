"""Types shared by several messages: tier names, letter grades, floats that may be infinite."""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal, get_args

from pydantic import ConfigDict, StringConstraints, WithJsonSchema

TIER_PATTERN: Final = r"^T(?:0|[1-9][0-9]?)$"
"""`T0` ... `T99`, one spelling each: `T01` would otherwise be a tier apart from `T1`."""
_TIER_RE: Final = re.compile(TIER_PATTERN)

EVERY_TIER: Final = tuple(f"T{n}" for n in range(100))
"""Every tier name `TIER_PATTERN` allows, T0 to T99."""

TierName = Annotated[str, StringConstraints(pattern=TIER_PATTERN)]
"""A tier, `T0` (bare prompt baseline) to `T99`."""

Grade = Literal["A", "B", "C", "D", "F"]
GRADES: Final[tuple[Grade, ...]] = get_args(Grade)
"""Every grade, best first."""

DropDetector = Literal["pass_rate", "score"]
"""The sequential drop detectors of a tier: its runs' pass or fail, and their judge scores."""

RejectReason = Literal["invalid_json", "schema", "too_large", "processing_error", "state_error"]
"""Why a message was dead-lettered: the first three are the input's fault and decided at the edge;
`processing_error` is an exception the core raised on one event (detail: stage and error), and
`state_error` a stored table value that could not be loaded or aggregated (it was reset)."""

ExtendedFloat = Annotated[
    float,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number"},
                {"type": "string", "enum": ["Infinity"]},
            ],
            "description": 'A number, or the string "Infinity" (JSON has no infinity literal).',
        }
    ),
]
"""A float that may be +inf (cost of pass when nothing passed); written as "Infinity" in JSON."""

OUTPUT_MODEL_CONFIG: Final = ConfigDict(
    frozen=True,
    extra="ignore",
    ser_json_inf_nan="strings",
)
"""Config of every message evalstream emits: immutable, infinity written as the string "Infinity",
unknown fields ignored when read back so that consumers survive additive schema changes."""


def tier_sort_key(tier: str) -> tuple[int, str]:
    """Order tiers numerically (T2 < T10)."""
    if not _TIER_RE.match(tier):
        raise ValueError(f"not a tier name: {tier!r}")
    return int(tier[1:]), tier
