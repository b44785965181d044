"""Aggregate statistics of a tier's rolling window."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, DropDetector, ExtendedFloat, Grade


class Statistics(BaseModel):
    """Seed 001's statistics over a list of values. With +inf among the values `mean` and
    `std_dev` are +inf; the others follow ordinary ordering. Never NaN."""

    model_config = OUTPUT_MODEL_CONFIG

    median: ExtendedFloat = Field(description="Mean of the two middle values for even counts.")
    mean: ExtendedFloat
    mode: ExtendedFloat = Field(
        description="Most frequent value rounded to 6 decimals; ties: the smallest."
    )
    min: ExtendedFloat
    max: ExtendedFloat
    std_dev: ExtendedFloat = Field(description="Population standard deviation (divides by n).")
    count: int


class ConfidenceInterval(BaseModel):
    """[low, high] of an estimate; see the field that holds it for its kind and level."""

    model_config = OUTPUT_MODEL_CONFIG

    low: float
    high: float


class CumulativeStats(BaseModel):
    """Every accepted run of the tier since its first (or since it came back after retiring),
    not only the window's: what the cross-tier differences compare."""

    model_config = OUTPUT_MODEL_CONFIG

    runs: int
    passes: int
    pass_rate: float = Field(description="passes / runs.")
    pass_rate_interval: ConfidenceInterval = Field(
        description="Anytime-valid confidence sequence of the pass rate at interval_confidence "
        "(Robbins' beta-binomial mixture): it holds whenever it is read, however often."
    )
    composite_mean: float = Field(description="Mean composite score of the runs.")
    composite_interval: ConfidenceInterval = Field(
        description="Anytime-valid confidence sequence of the mean composite score, as for "
        "the pass rate."
    )


class DropStatus(BaseModel):
    """The tier's sequential drop detectors (what TierDropped pages on); see docs/statistics.md."""

    model_config = OUTPUT_MODEL_CONFIG

    dropped: bool = Field(
        description="A detector paged and the runs since have not come back to the reference."
    )
    monitoring: bool = Field(
        description="The warm-up is over (drop_warmup_runs reference runs): the detectors run."
    )
    reference_runs: int = Field(description="Runs the reference learned from.")
    pass_rate_reference: float = Field(
        description="The pass rate a fall is measured from: the Wilson lower bound of the "
        "reference runs' pass rate at drop_reference_z."
    )
    score_reference: float = Field(
        description="The mean judge score a fall is measured from, a lower bound likewise."
    )
    evidence: dict[DropDetector, float] = Field(
        description="Each detector's evidence of a fall as a fraction of its threshold, on a log "
        "scale: log(1 + R) / log(1 + threshold); 1 pages."
    )


class TierAggregate(BaseModel):
    """The state of one `(experiment_id, tier)` window after an accepted run."""

    model_config = OUTPUT_MODEL_CONFIG

    experiment_id: str
    tier: str
    runs: int = Field(description="Runs in the window now.")
    capacity: int = Field(
        description="The window's capacity; the window is full when runs == capacity."
    )
    run_ids: list[str] = Field(description="Oldest to newest by (completed_at, run_id).")
    latest_completed_at: AwareDatetime = Field(description="completed_at of the newest run.")
    pass_rate: Statistics
    impl_rate: Statistics
    cost_usd: Statistics | None = Field(
        description="Over the window's priced runs (`count` of them); null when none is."
    )
    duration_seconds: Statistics
    cost_of_pass: Statistics | None = Field(
        description="Over the window's priced runs, likewise; null when none is."
    )
    composite_score: Statistics
    code_bleu: Statistics | None = Field(
        default=None, description="Over the window's runs that carry code; null when none does."
    )
    test_pass_rate: Statistics | None = Field(
        default=None, description="Over the window's runs whose tests ran; null when none."
    )
    grade: Grade = Field(description="Letter grade of the median composite score.")
    pass_at_k: dict[str, float] = Field(
        description="Unbiased pass@k over the window; keys only for k <= runs."
    )
    pass_rate_interval: ConfidenceInterval = Field(
        description="Fixed-sample Wilson score interval of the window's pass rate at "
        "interval_confidence (the window is the last `capacity` runs: a sliding sample, read "
        "as a snapshot, not accumulated as evidence)."
    )
    cumulative: CumulativeStats
    drop: DropStatus
