"""A tier window's aggregate: seed 001's statistics per metric, the grade and pass@k."""

from __future__ import annotations

from schemas.aggregates import GradeDropSignal, Statistics, TierAggregate
from stream_app.core.config import CoreConfig
from stream_app.core.window import TierWindow, from_epoch_us
from stream_app.metrics.grades import assign_letter_grade
from stream_app.metrics.pass_at_k import calculate_pass_at_k
from stream_app.metrics.statistics import compute_statistics


def _optional_statistics(values: list[float | None]) -> Statistics | None:
    """Statistics over the runs that have the metric; None when no run has it."""
    present = [v for v in values if v is not None]
    return compute_statistics(present) if present else None


def aggregate_window(
    experiment_id: str,
    tier: str,
    window: TierWindow,
    config: CoreConfig,
    grade_drop: GradeDropSignal | None = None,
) -> TierAggregate:
    """Aggregate of a non-empty window. The grade is that of the median composite score;
    `grade_drop` is the tier's drop signal (it needs the tier's history, not just the window)."""
    entries = window.entries
    if not entries:
        raise ValueError(f"window {experiment_id}/{tier} is empty")
    n = len(entries)
    passes = sum(1 for e in entries if e.pass_rate == 1.0)
    composite = compute_statistics([e.composite_score for e in entries])
    return TierAggregate(
        experiment_id=experiment_id,
        tier=tier,
        runs=n,
        capacity=window.capacity,
        run_ids=[e.run_id for e in entries],
        latest_completed_at=from_epoch_us(entries[-1].completed_at_us),
        pass_rate=compute_statistics([e.pass_rate for e in entries]),
        impl_rate=compute_statistics([e.impl_rate for e in entries]),
        cost_usd=compute_statistics([e.cost_usd for e in entries]),
        duration_seconds=compute_statistics([e.duration_seconds for e in entries]),
        cost_of_pass=compute_statistics([e.cost_of_pass for e in entries]),
        composite_score=composite,
        code_bleu=_optional_statistics([e.code_bleu for e in entries]),
        test_pass_rate=_optional_statistics([e.test_pass_rate for e in entries]),
        grade=assign_letter_grade(composite.median, config.grade_thresholds),
        pass_at_k={
            str(k): calculate_pass_at_k(n, passes, k) for k in config.pass_at_k.k_values if k <= n
        },
        **({"grade_drop": grade_drop} if grade_drop is not None else {}),
    )
