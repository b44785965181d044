"""What the pure core depends on: the metric formulas' parameters, the window size, the baseline
tier, pricing and the input size limit. `service.settings.Settings` adds the service's settings."""

from __future__ import annotations

import math
from functools import cached_property
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.common import TierName
from stream_app.code_quality.code_bleu import DEFAULT_WEIGHTS as DEFAULT_CODE_BLEU_WEIGHTS
from stream_app.core.grade_drop import DropParameters
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
        if any(not math.isfinite(v) or v < 0 for v in value.values()) or sum(value.values()) <= 0:
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

    grade_drop_runs: int = Field(
        default=30,
        ge=1,
        le=1_000,
        description="A tier's grade drop counts when every full window after each of its last "
        "this many runs graded low (see core.grade_drop).",
    )
    grade_level_half_life_runs: float = Field(
        default=100.0,
        ge=1,
        le=1_000_000,
        description="Half-life, in runs, of the tier's own grade level a drop is measured from "
        "(at least one run: a shorter one makes the level a copy of the last window).",
    )
    grade_drop_steps: float = Field(
        default=2.0,
        ge=1,
        le=3.5,
        description="Letters below its level the sustained grade must fall to be a drop (at "
        "most 3.5: a level is a mean, an A tier's is below 4, so 4 would never page).",
    )

    @cached_property
    def grade_drop(self) -> DropParameters:
        """The grade-drop detector's parameters."""
        return DropParameters(
            self.grade_drop_runs, self.grade_level_half_life_runs, self.grade_drop_steps
        )

    @cached_property
    def price_table(self) -> dict[str, ModelPrice]:
        """The built-in prices with the configured ones on top (names case-insensitive)."""
        return {
            **DEFAULT_PRICING,
            **{normalize_model_name(k): v for k, v in self.pricing.items()},
        }
