"""What the pure core depends on: the metric formulas' parameters, the window size, the baseline
tier, pricing and the input size limit. `service.settings.Settings` adds the service's settings."""

from __future__ import annotations

import math
from functools import cached_property
from typing import Final, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.common import TierName
from stream_app.code_quality.code_bleu import DEFAULT_WEIGHTS as DEFAULT_CODE_BLEU_WEIGHTS
from stream_app.core.drop_detector import DropDesign
from stream_app.metrics.grades import GradeThresholds
from stream_app.metrics.pass_at_k import DEFAULT_K_VALUES
from stream_app.metrics.pricing import DEFAULT_PRICING, ModelPrice, normalize_model_name
from stream_app.metrics.run_metrics import CompositeWeights

ONE_MIB: Final = 1024 * 1024


class PassAtKConfig(BaseModel):
    """Which k the aggregates report pass@k for (seed 004's `pass_at_k.k_values`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k_values: tuple[int, ...] = DEFAULT_K_VALUES

    @field_validator("k_values")
    @classmethod
    def _positive_sorted(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(k < 1 for k in value):
            raise ValueError("k_values must be a non-empty list of integers >= 1")
        return tuple(sorted(set(value)))


class CodeBleuConfig(BaseModel):
    """Seed 004's `code_bleu.weights`: n-gram, weighted n-gram, AST and dataflow match."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_CODE_BLEU_WEIGHTS))

    @field_validator("weights")
    @classmethod
    def _four_nonnegative(cls, value: dict[str, float]) -> dict[str, float]:
        if set(value) != set(DEFAULT_CODE_BLEU_WEIGHTS):
            raise ValueError(f"code_bleu.weights needs exactly {sorted(DEFAULT_CODE_BLEU_WEIGHTS)}")
        if (
            any(not math.isfinite(v) or v < 0 for v in value.values())
            or math.fsum(value.values()) <= 0
        ):
            raise ValueError("code_bleu.weights must be >= 0 with a positive sum")
        return value


class CoreConfig(BaseModel):
    """Everything the metric formulas, the windows and the validation depend on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    window_size: int = Field(default=10, ge=1, le=10_000, description="Runs per tier window.")
    composite_weights: CompositeWeights = CompositeWeights()
    grade_thresholds: GradeThresholds = GradeThresholds()
    baseline_tier: TierName = "T0"
    pass_at_k: PassAtKConfig = PassAtKConfig()
    code_bleu: CodeBleuConfig = CodeBleuConfig()
    pricing: dict[str, ModelPrice] = Field(
        default_factory=dict, description="USD per 1M tokens; merged over the built-in table."
    )
    max_message_bytes: int = Field(default=ONE_MIB, ge=1, description="Larger inputs: too_large.")
    experiment_idle_ttl_s: float = Field(
        default=14 * 86_400,
        ge=0,
        le=100 * 365 * 86_400,
        description="An experiment with no accepted run for this long is retired (0: never); "
        "the worker counts processing time, replay event time.",
    )

    drop_false_page_runs: float = Field(
        default=1_000_000,
        ge=1_000,
        le=1e15,
        description="Expected runs between false pages of one tier, counting both drop "
        "detectors: a tier whose runs are as good as its reference pages falsely at most once "
        "per this many runs on average (see core.drop_detector).",
    )
    drop_smallest_fall: float = Field(
        default=0.2,
        gt=0,
        le=0.5,
        description="The smallest fall worth a page, in pass rate and in mean judge score "
        "(0.2: 20 points). Falls of 1, 2 and 3 times it are watched; smaller ones page later.",
    )
    drop_warmup_runs: int = Field(
        default=50,
        ge=10,
        le=100_000,
        description="Runs a tier's reference learns from before its detectors run.",
    )
    drop_reference_runs: int = Field(
        default=1000,
        ge=10,
        le=10_000_000,
        description="Runs a tier's reference learns from, after which it stays (a slow fall "
        "cannot drag it down); at least drop_warmup_runs.",
    )
    drop_reference_z: float = Field(
        default=2.0,
        ge=0.5,
        le=5,
        description="How conservatively the reference is learned: its pass rate and mean score "
        "are lower confidence bounds at this many standard errors.",
    )
    interval_confidence: float = Field(
        default=0.95,
        ge=0.5,
        le=0.9999,
        description="Level of the pass-rate and composite intervals; an experiment's "
        "differences against the baseline hold at this level all together.",
    )

    @model_validator(mode="after")
    def _reference_after_warm_up(self) -> Self:
        if self.drop_reference_runs < self.drop_warmup_runs:
            raise ValueError(
                f"drop_reference_runs ({self.drop_reference_runs}) must be at least "
                f"drop_warmup_runs ({self.drop_warmup_runs}): the reference learns the warm-up"
            )
        return self

    @cached_property
    def drop_design(self) -> DropDesign:
        """The drop detectors' design."""
        return DropDesign(
            false_page_runs=self.drop_false_page_runs,
            smallest_fall=self.drop_smallest_fall,
            warmup_runs=self.drop_warmup_runs,
            reference_z=self.drop_reference_z,
            reference_runs=self.drop_reference_runs,
        )

    @cached_property
    def price_table(self) -> dict[str, ModelPrice]:
        """The built-in prices with the configured ones on top (names case-insensitive)."""
        return {
            **DEFAULT_PRICING,
            **{normalize_model_name(k): v for k, v in self.pricing.items()},
        }
