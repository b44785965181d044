"""What a suite's tier shows: its drop detectors over every experiment of the suite."""

from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, DropDetector


class SuiteDrop(BaseModel):
    """The suite's drop detectors (SuiteTierDropped pages on `dropped`)."""

    model_config = OUTPUT_MODEL_CONFIG

    dropped: bool = Field(description="A threshold was reached within the detectors' windows.")
    evidence: dict[DropDetector, float] = Field(
        description="Per detector, log(1 + R) / log(1 + threshold) now: 1 pages."
    )


class SuiteTier(BaseModel):
    """One `(suite, tier)`: the suite is the events' `suite`, or their `model` without one."""

    model_config = OUTPUT_MODEL_CONFIG

    suite: str
    tier: str
    experiments: int = Field(description="Experiments with a share of it (until they retire).")
    runs: int = Field(description="Runs counted, each once (a repeat is dropped).")
    drop: SuiteDrop
