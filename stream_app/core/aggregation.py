"""A tier window's aggregate: seed 001's statistics per metric, the grade and pass@k, with the
tier's cumulative counts and drop status beside them."""

from __future__ import annotations

from schemas.aggregates import (
    ConfidenceInterval,
    CumulativeStats,
    DropStatus,
    Statistics,
    TierAggregate,
)
from stream_app.core.config import CoreConfig
from stream_app.core.drop_detector import DETECTORS, DropState
from stream_app.core.totals import Totals
from stream_app.core.window import TierWindow, from_epoch_us
from stream_app.metrics.grades import assign_letter_grade
from stream_app.metrics.intervals import Interval, mean_sequence, wilson_interval
from stream_app.metrics.pass_at_k import calculate_pass_at_k
from stream_app.metrics.statistics import compute_statistics


def _optional_statistics(values: list[float | None]) -> Statistics | None:
    """Statistics over the runs that have the metric; None when no run has it."""
    present = [v for v in values if v is not None]
    return compute_statistics(present) if present else None


def _interval(interval: Interval) -> ConfidenceInterval:
    return ConfidenceInterval(low=interval.low, high=interval.high)


def cumulative_stats(totals: Totals, confidence: float) -> CumulativeStats:
    """A tier's cumulative block: counts, means and their confidence sequences."""
    runs = max(totals.runs, 1)
    return CumulativeStats(
        runs=totals.runs,
        passes=totals.passes,
        pass_rate=totals.passes / runs,
        pass_rate_interval=_interval(mean_sequence(totals.passes, totals.runs, confidence)),
        composite_mean=totals.composite_sum / runs,
        composite_interval=_interval(mean_sequence(totals.composite_sum, totals.runs, confidence)),
    )


def drop_status(drop: DropState, config: CoreConfig) -> DropStatus:
    """What the drop detectors show: whether a drop is in effect, the references, the evidence."""
    design = config.drop_design
    reference = drop.reference
    return DropStatus(
        dropped=drop.dropped,
        monitoring=drop.monitoring(design),
        reference_runs=reference.runs,
        pass_rate_reference=round(reference.pass_rate(design.reference_z), 6),
        score_reference=round(reference.score(design.reference_z), 6),
        evidence={d: round(drop.ratio(d, design), 6) for d in DETECTORS},
    )


def aggregate_window(
    experiment_id: str,
    tier: str,
    window: TierWindow,
    config: CoreConfig,
    *,
    totals: Totals | None = None,
    drop: DropState | None = None,
) -> TierAggregate:
    """Aggregate of a non-empty window. The grade is that of the median composite score;
    `totals` and `drop` are the tier's (they need its history, not just the window: without
    them, the window's runs are taken as its whole history)."""
    entries = window.entries
    if not entries:
        raise ValueError(f"window {experiment_id}/{tier} is empty")
    n = len(entries)
    passes = sum(1 for e in entries if e.pass_rate == 1.0)
    composite = compute_statistics([e.composite_score for e in entries])
    confidence = config.interval_confidence
    return TierAggregate(
        experiment_id=experiment_id,
        tier=tier,
        runs=n,
        capacity=window.capacity,
        run_ids=[e.run_id for e in entries],
        latest_completed_at=from_epoch_us(entries[-1].completed_at_us),
        pass_rate=compute_statistics([e.pass_rate for e in entries]),
        impl_rate=compute_statistics([e.impl_rate for e in entries]),
        cost_usd=_optional_statistics([e.cost_usd for e in entries]),
        duration_seconds=compute_statistics([e.duration_seconds for e in entries]),
        cost_of_pass=_optional_statistics([e.cost_of_pass for e in entries]),
        composite_score=composite,
        code_bleu=_optional_statistics([e.code_bleu for e in entries]),
        test_pass_rate=_optional_statistics([e.test_pass_rate for e in entries]),
        grade=assign_letter_grade(composite.median, config.grade_thresholds),
        pass_at_k={
            str(k): calculate_pass_at_k(n, passes, k) for k in config.pass_at_k.k_values if k <= n
        },
        pass_rate_interval=_interval(wilson_interval(passes, n, confidence)),
        cumulative=cumulative_stats(totals or Totals.of(entries), confidence),
        drop=drop_status(drop or DropState(), config),
    )
