"""A full window's grade moved: what alerting and on-call care about most."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, Grade


class GradeChange(BaseModel):
    """Published to `grade-changes` when a full window's grade differs from its previous
    full-window grade. Delivery is at-least-once: a redelivered run can publish the same change
    twice, byte-identical; `(experiment_id, tier, run_id)` identifies a change."""

    model_config = OUTPUT_MODEL_CONFIG

    experiment_id: str
    tier: str
    previous_grade: Grade
    grade: Grade
    direction: Literal["drop", "rise"]
    composite_median: float = Field(description="Median composite score of the window now.")
    at: AwareDatetime = Field(description="completed_at of the window's newest run (event time).")
    run_id: str = Field(description="The run whose arrival changed the grade.")
