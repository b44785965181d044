"""Per-run metrics of seed 001, computed from one accepted `RunCompleted`."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, ExtendedFloat, Grade


class RunMetrics(BaseModel):
    """One run's metrics. `cost_of_pass` is +inf ("Infinity") for a failed run."""

    model_config = OUTPUT_MODEL_CONFIG

    run_id: str
    experiment_id: str
    tier: str
    model: str
    suite: str = Field(description="The event's `suite`, or its `model` without one.")
    subtest: str | None = Field(default=None, description="The event's subtest, if any.")
    completed_at: AwareDatetime
    pass_rate: float
    impl_rate: float
    cost_usd: float
    cost_source: Literal["event", "pricing", "catalog"] = Field(
        description="What priced the run: its own cost_usd, the price table, or genai-prices' "
        "catalog (the `prices` extra)."
    )
    duration_seconds: float
    cost_of_pass: ExtendedFloat
    composite_score: float
    grade: Grade
    code_bleu: float | None = Field(
        default=None, description="CodeBLEU of `code`; null without it."
    )
    test_pass_rate: float | None = Field(
        default=None, description="passed / (passed + failed + errors); null when no test ran."
    )
