"""Aggregate statistics of a tier's rolling window."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, ExtendedFloat, Grade


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


class GradeDropSignal(BaseModel):
    """Whether the tier's grade has dropped for more than window noise (see the README's
    alerting section): the best grade of its recent full windows against its own usual level."""

    model_config = OUTPUT_MODEL_CONFIG

    sustained_grade: Grade | None = Field(
        description="Best grade of the full windows after each of the last grade_drop_runs "
        "runs; null until the tier has had that many full windows."
    )
    level_points: float | None = Field(
        description="The tier's usual grade in points (A=4 B=3 C=2 D=1 F=0): an exponentially "
        "weighted mean over its older full windows; null until one has aged into it."
    )
    dropped: bool = Field(
        description="The sustained grade fell grade_drop_steps letters below the level and "
        "has not come back within one letter less."
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
    cost_usd: Statistics
    duration_seconds: Statistics
    cost_of_pass: Statistics
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
    grade_drop: GradeDropSignal = Field(
        default=GradeDropSignal(sustained_grade=None, level_points=None, dropped=False),
        description="The noise-robust grade-drop signal that TierGradeDropped pages on.",
    )
