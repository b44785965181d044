"""Seed 001's formulas and seed 004's pass@k, pure: no Kafka, no Faust, no I/O. The streaming
worker, the batch `replay` command and the tests all call these."""

from stream_app.metrics.cross_tier import cross_tier_report, tier_uplift
from stream_app.metrics.grades import GradeThresholds, assign_letter_grade, grade_points
from stream_app.metrics.pass_at_k import (
    calculate_pass_at_k,
    calculate_pass_at_k_for_multiple,
    mean_pass_at_k,
)
from stream_app.metrics.pricing import DEFAULT_PRICING, ModelPrice, find_price
from stream_app.metrics.run_metrics import (
    CompositeWeights,
    composite_score,
    compute_run_metrics,
    cost_of_pass,
    pass_rate,
)
from stream_app.metrics.statistics import compute_statistics, population_variance

__all__ = [
    "DEFAULT_PRICING",
    "CompositeWeights",
    "GradeThresholds",
    "ModelPrice",
    "assign_letter_grade",
    "calculate_pass_at_k",
    "calculate_pass_at_k_for_multiple",
    "composite_score",
    "compute_run_metrics",
    "compute_statistics",
    "cost_of_pass",
    "cross_tier_report",
    "find_price",
    "grade_points",
    "mean_pass_at_k",
    "pass_rate",
    "population_variance",
    "tier_uplift",
]
