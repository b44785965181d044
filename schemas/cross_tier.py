"""Cross-tier comparison of one experiment."""

from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, ExtendedFloat


class Difference(BaseModel):
    """A tier's mean minus the baseline's, on every run each has had, with its interval."""

    model_config = OUTPUT_MODEL_CONFIG

    estimate: float
    low: float
    high: float
    significant: bool = Field(description="The interval excludes 0.")


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
    cost_variance: float | None = Field(
        description="Population variance of the priced tiers' median costs; null when no tier's "
        "window has a priced run."
    )
    cost_delta: float | None = Field(
        description="Max minus min of the priced tiers' median costs (USD); null likewise."
    )
    pass_rate_difference: dict[str, Difference] = Field(
        description="Cumulative pass rate of every non-baseline tier minus the baseline's, with "
        "an anytime-valid confidence sequence; all of an experiment's pass-rate intervals hold "
        "at once with probability difference_confidence (see docs/statistics.md). Empty while "
        "the baseline has no run."
    )
    composite_difference: dict[str, Difference] = Field(
        description="The same for the mean composite score (a family of its own, at the same "
        "level)."
    )
    difference_confidence: float = Field(
        description="Simultaneous level of each family of the experiment's differences: each "
        "interval is at 1 - (1 - difference_confidence) / m for its m non-baseline tiers "
        "(Bonferroni)."
    )
