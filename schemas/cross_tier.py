"""Cross-tier comparison of one experiment."""

from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, ExtendedFloat


class CrossTierReport(BaseModel):
    """Computed over the current aggregates of every tier of one experiment."""

    model_config = OUTPUT_MODEL_CONFIG

    experiment_id: str
    baseline_tier: str
    tiers: list[str] = Field(description="Tiers with an aggregate, in numeric order.")
    tier_uplift: dict[str, ExtendedFloat | None] = Field(
        description=(
            "(median composite - baseline's) / baseline's for every non-baseline tier; null when "
            "the baseline's median composite is 0; empty when the baseline has no aggregate yet."
        )
    )
    pass_rate_variance: float = Field(
        description="Population variance of the tiers' median pass rates."
    )
    impl_rate_variance: float = Field(
        description="Population variance of the tiers' median impl rates."
    )
    cost_variance: float = Field(description="Population variance of the tiers' median costs.")
    cost_delta: float = Field(description="Max minus min of the tiers' median costs (USD).")
