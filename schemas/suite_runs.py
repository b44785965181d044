"""The message of the suite hop's topic (`evalstream-suite-runs`): the accepted runs of one
`(suite, tier)` from one batch of the windows hop, or the experiments retired from it. Written and
read by `stream_app/core/suite_message.py`, compactly (each run an array); this model is its
contract, and a test checks that every message written validates against it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG

Count = Annotated[int, Field(ge=0, lt=2**63)]
Experiment = Annotated[str, Field(min_length=1, description="The run's experiment.")]
Incarnation = Annotated[Count, Field(description="Its tier's incarnation: from its first run.")]
Sequence = Annotated[Count, Field(description="Its tier's accepted runs, counting it.")]
CompletedAt = Annotated[Count, Field(description="When it completed, in microseconds.")]
Evidence = Annotated[
    list[int],
    Field(
        min_length=6,
        max_length=6,
        description="Its evidence: log e of each pass/fail fall, then of each score tilt, "
        "in units of 2^-32 (docs/statistics.md, 'Suites').",
    ),
]
Outcome = Annotated[int, Field(ge=0, le=1, description="1 when it passed, else 0.")]
SuiteRunRow = (
    tuple[Experiment, Incarnation, Sequence, CompletedAt, Evidence, Outcome]
    | tuple[Experiment, Incarnation, Sequence, CompletedAt, Evidence]
)
"""A run: with its outcome (what workers write), or without (a run read from a version 2
message has none)."""


class SuiteRunsMessage(BaseModel):
    """Runs of one suite tier, or experiments retired from it (version 3)."""

    model_config = OUTPUT_MODEL_CONFIG

    v: Literal[3] = Field(
        description="Format version (1: one run a message, a bare array; 2: runs without their "
        "outcome). Workers read all three."
    )
    suite: str = Field(min_length=1, description="The events' `suite`, or their `model`.")
    tier: str = Field(min_length=1)
    runs: list[SuiteRunRow] = Field(default_factory=list, description="In the tier's order.")
    retired: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Experiments whose share of the suite goes."
    )
