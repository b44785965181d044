"""Per-run metrics of seed 001, computed from one accepted `RunCompleted`."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, ExtendedFloat, Grade


class RunMetrics(BaseModel):
    """One run's metrics. `cost_of_pass` is +inf ("Infinity") for a failed run; both costs are
    null for a run that no source could price."""

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
    cost_usd: float | None = Field(
        description="Null when no source could price the run (cost_source `unpriced`)."
    )
    cost_source: Literal["event", "pricing", "catalog", "unpriced"] = Field(
        description="What priced the run: its own cost_usd, the price table, or genai-prices' "
        "catalog (the `prices` extra); `unpriced` when none could."
    )
    duration_seconds: float
    cost_of_pass: ExtendedFloat | None = Field(description="Null for an unpriced run.")
    composite_score: float
    grade: Grade
    code_bleu: float | None = Field(
        default=None, description="CodeBLEU of `code`; null without it."
    )
    test_pass_rate: float | None = Field(
        default=None, description="passed / (passed + failed + errors); null when no test ran."
    )
