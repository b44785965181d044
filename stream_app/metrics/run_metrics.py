"""Seed 001's per-run metrics of one accepted `RunCompleted`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.run_completed import RunCompleted
from schemas.run_metrics import RunMetrics
from stream_app.code_quality.code_bleu import calculate_code_bleu
from stream_app.code_quality.test_pass_rate import calculate_test_pass_rate
from stream_app.metrics.catalog_prices import catalog_price
from stream_app.metrics.grades import DEFAULT_THRESHOLDS, GradeThresholds, assign_letter_grade
from stream_app.metrics.pricing import ModelPrice, find_price


class CompositeWeights(BaseModel):
    """Weights of the composite score (seed 001: 0.5 / 0.5)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pass_rate: float = Field(default=0.5, ge=0, le=1e6, allow_inf_nan=False)
    impl_rate: float = Field(default=0.5, ge=0, le=1e6, allow_inf_nan=False)

    @model_validator(mode="after")
    def _positive_total(self) -> Self:
        if self.pass_rate + self.impl_rate <= 0:
            raise ValueError("composite weights must not both be 0")
        return self


DEFAULT_WEIGHTS: Final = CompositeWeights()


def pass_rate(passed: bool) -> float:
    """1.0 for a passed run, 0.0 otherwise."""
    return 1.0 if passed else 0.0


def cost_of_pass(cost_usd: float | None, rate: float) -> float | None:
    """What one pass costs (cost / pass_rate); +inf when the run did not pass; None (unknown)
    when the run is unpriced."""
    if cost_usd is None:
        return None
    if rate == 0:
        return math.inf
    return cost_usd / rate


def composite_score(
    pass_rate_value: float, impl_rate: float, weights: CompositeWeights = DEFAULT_WEIGHTS
) -> float:
    """(pass·w_pass + impl·w_impl) / (w_pass + w_impl)."""
    total = weights.pass_rate + weights.impl_rate
    return (pass_rate_value * weights.pass_rate + impl_rate * weights.impl_rate) / total


CostSource = Literal["event", "pricing", "catalog", "unpriced"]


def run_cost_usd(
    run: RunCompleted, pricing: Mapping[str, ModelPrice]
) -> tuple[float | None, CostSource]:
    """The run's cost and what priced it: the event's own cost, else the price table, else
    genai-prices' catalog at the run's completion (`catalog_prices`). A run none of them can
    price is kept, unpriced (None), not $0 and not refused: its pass and scores still count."""
    if run.cost_usd is not None:
        return run.cost_usd, "event"
    price = find_price(run.model, pricing)
    if price is not None:
        return price.cost_usd(run.tokens), "pricing"
    price = catalog_price(run.model, run.completed_at)
    if price is None:
        return None, "unpriced"
    return price.cost_usd(run.tokens), "catalog"


def compute_run_metrics(
    run: RunCompleted,
    pricing: Mapping[str, ModelPrice],
    weights: CompositeWeights = DEFAULT_WEIGHTS,
    thresholds: GradeThresholds = DEFAULT_THRESHOLDS,
    code_bleu_weights: Mapping[str, float] | None = None,
) -> RunMetrics:
    """Every per-run metric; CodeBLEU and the test pass rate when the run carries `code` and
    `tests`."""
    cost, source = run_cost_usd(run, pricing)
    rate = pass_rate(run.passed)
    impl = run.judgment.summary.weighted_score
    composite = composite_score(rate, impl, weights)
    return RunMetrics(
        run_id=run.run_id,
        experiment_id=run.experiment_id,
        tier=run.tier,
        model=run.model,
        suite=run.suite or run.model,
        subtest=run.subtest,
        completed_at=run.completed_at,
        pass_rate=rate,
        impl_rate=impl,
        cost_usd=cost,
        cost_source=source,
        duration_seconds=(run.completed_at - run.started_at).total_seconds(),
        cost_of_pass=cost_of_pass(cost, rate),
        composite_score=composite,
        grade=assign_letter_grade(composite, thresholds),
        code_bleu=calculate_code_bleu(
            run.code.candidate, run.code.reference, code_bleu_weights, run.code.language
        ).code_bleu
        if run.code is not None
        else None,
        test_pass_rate=calculate_test_pass_rate(**run.tests.model_dump())
        if run.tests is not None
        else None,
    )
