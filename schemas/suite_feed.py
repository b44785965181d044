"""The message of the suite hop's topic (`evalstream-suite-feed`): the accepted runs of one
`(suite, tier)` from one batch of the windows hop, or the experiments retired from it, each run
an array. This model is the format's one definition: the worker reads and writes it through the
model (`stream_app/core/suite/message.py`), and its JSON Schema is exported from it."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from schemas.common import TIER_PATTERN

VERSION: Final = 4
"""The only version: no release wrote another (docs/architecture.md, 'Stored formats')."""
LOG_UNIT: Final = 2**32
"""Fixed-point units per nat of a run's evidence (log e): sums exact in any order."""
MAX_EVIDENCE_UNITS: Final = 1000 * LOG_UNIT
"""No run's log evidence is as large as 1000 nats: a message claiming more is not a run's."""
EVIDENCE_SIZE: Final = 6
"""Pieces of evidence a run carries: each pass/fail fall, then each score tilt."""

Count = Annotated[int, Field(ge=0, lt=2**63)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200)]
"""A name the suite table keys its records by (JSON cannot carry a lone surrogate here: the
reader refuses it, so UTF-8 can always write the key)."""
Experiment = Annotated[Name, Field(description="The run's experiment.")]
Incarnation = Annotated[
    int, Field(ge=1, lt=2**63, description="Its tier's incarnation: from its first run.")
]
Sequence = Annotated[
    int, Field(ge=1, lt=2**63, description="Its tier's accepted runs, counting it.")
]
CompletedAt = Annotated[Count, Field(description="When it completed, in microseconds.")]
Evidence = Annotated[
    tuple[
        Annotated[int, Field(ge=-MAX_EVIDENCE_UNITS, le=MAX_EVIDENCE_UNITS)],
        ...,
    ],
    Field(
        min_length=EVIDENCE_SIZE,
        max_length=EVIDENCE_SIZE,
        description="Its evidence: log e of each pass/fail fall, then of each score tilt, "
        "in units of 2^-32 (docs/statistics.md, 'Suites').",
    ),
]
Outcome = Annotated[int, Field(ge=0, le=1, description="1 when it passed, else 0.")]
Composite = Annotated[
    float, Field(ge=0, le=1, allow_inf_nan=False, description="Its composite score.")
]
SuiteRunRow = tuple[Experiment, Incarnation, Sequence, CompletedAt, Evidence, Outcome, Composite]
"""A run, as it travels."""


class SuiteFeedMessage(BaseModel):
    """Runs of one suite tier, or experiments retired from it. Strict: a number that is not an
    integer, a field it does not know or a version other than 4 is refused."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    v: Annotated[int, Field(ge=VERSION, le=VERSION, description="Format version: 4.")]
    suite: Annotated[Name, Field(description="The events' `suite`, or their `model`.")]
    tier: Annotated[str, StringConstraints(pattern=TIER_PATTERN)]
    runs: tuple[SuiteRunRow, ...] = Field(default=(), description="In the tier's order.")
    retired: tuple[Name, ...] = Field(
        default=(), description="Experiments whose share of the suite goes."
    )
