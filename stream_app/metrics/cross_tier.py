"""Seed 001's cross-tier metrics of one experiment, over its tiers' current aggregates."""

from __future__ import annotations

from collections.abc import Mapping

from schemas.aggregates import TierAggregate
from schemas.common import tier_sort_key
from schemas.cross_tier import CrossTierReport
from stream_app.metrics.statistics import population_variance


def tier_uplift(tier_score: float, baseline_score: float) -> float | None:
    """(tier - baseline) / baseline; None (undefined) when the baseline scores 0."""
    if baseline_score == 0:
        return None
    return (tier_score - baseline_score) / baseline_score


def cross_tier_report(
    experiment_id: str, aggregates: Mapping[str, TierAggregate], baseline_tier: str = "T0"
) -> CrossTierReport:
    """Uplift of every tier over the baseline, and the spread of the tiers' medians.
    `aggregates` maps tier name to that tier's latest aggregate; it must not be empty."""
    if not aggregates:
        raise ValueError(f"experiment {experiment_id!r} has no tier aggregates")
    tiers = sorted(aggregates, key=tier_sort_key)
    ordered = [aggregates[t] for t in tiers]
    uplift: dict[str, float | None] = {}
    baseline = aggregates.get(baseline_tier)
    if baseline is not None:
        base = baseline.composite_score.median
        uplift = {
            t: tier_uplift(aggregates[t].composite_score.median, base)
            for t in tiers
            if t != baseline_tier
        }
    costs = [a.cost_usd.median for a in ordered]
    return CrossTierReport(
        experiment_id=experiment_id,
        baseline_tier=baseline_tier,
        tiers=tiers,
        tier_uplift=uplift,
        pass_rate_variance=population_variance([a.pass_rate.median for a in ordered]),
        impl_rate_variance=population_variance([a.impl_rate.median for a in ordered]),
        cost_variance=population_variance(costs),
        cost_delta=max(costs) - min(costs),
    )
