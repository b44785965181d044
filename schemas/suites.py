"""What a suite's tier shows: its pass rate and its mean composite over the suite's experiments,
and each one's difference from the baseline paired by experiment, each with a confidence
sequence, and its drop detectors over every experiment of the suite."""

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


class SuiteEstimate(BaseModel):
    """A suite figure and its confidence sequence (valid at every look)."""

    model_config = OUTPUT_MODEL_CONFIG

    estimate: float
    low: float
    high: float


class SuiteDifference(SuiteEstimate):
    """A tier's suite difference from the baseline."""

    significant: bool = Field(description="The interval excludes 0.")


class SuiteTier(BaseModel):
    """One `(suite, tier)`: the suite is the events' `suite`, or their `model` without one. Its
    intervals cover the experiments counted so far, not those still to come."""

    model_config = OUTPUT_MODEL_CONFIG

    suite: str
    tier: str
    experiments: int = Field(
        description="Experiments paired with the baseline (the difference's); for the baseline "
        "tier, the experiments it has runs in."
    )
    runs: int = Field(description="Runs counted, each once (a repeat is dropped).")
    experiments_with_runs: int = Field(
        description="Experiments with a share of it (until they retire): what its drop "
        "detectors pool and its pass rate covers."
    )
    baseline_tier: str
    pass_rate: SuiteEstimate | None = Field(
        description="The mean over its experiments of its pass rate in each, each experiment "
        "weighing the same; null only while no run is counted."
    )
    pass_rate_difference: SuiteDifference | None = Field(
        description="Its pass rate minus the baseline's, paired by experiment: over the "
        "experiments in which both have runs, the mean of (its pass rate - the baseline's) in "
        "each, each experiment weighing the same. All of a suite's differences hold together "
        "at level difference_confidence. Null for the baseline tier, and until an experiment "
        "is paired."
    )
    mean_composite: SuiteEstimate | None = Field(
        description="The mean over its experiments of its mean composite score in each, each "
        "experiment weighing the same; null only while no run is counted.",
    )
    mean_composite_difference: SuiteDifference | None = Field(
        description="Its mean composite minus the baseline's, paired by experiment, as "
        "pass_rate_difference is. All of a suite's composite differences hold together at "
        "level difference_confidence. Null for the baseline tier, and until an experiment is "
        "paired."
    )
    difference_confidence: float = Field(
        description="Simultaneous level of a suite's differences of each figure: each interval "
        "is at 1 - (1 - difference_confidence) / m for the suite's m tiers paired with the "
        "baseline (Bonferroni); each pass rate's and mean composite's interval is at "
        "difference_confidence."
    )
    drop: SuiteDrop
