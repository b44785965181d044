"""Seed 001's cross-tier metrics of one experiment, over its tiers' current aggregates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from schemas.aggregates import TierAggregate
from schemas.common import tier_sort_key
from schemas.cross_tier import CrossTierReport
from stream_app.metrics.statistics import population_variance


def tier_uplift(tier_score: float, baseline_score: float) -> float | None:
    """(tier - baseline) / baseline; None (undefined) when the baseline scores 0."""
    if baseline_score == 0:
        return None
    return (tier_score - baseline_score) / baseline_score


class TierMedians(NamedTuple):
    """What the cross-tier metrics need of a tier's aggregate."""

    composite_score: float
    pass_rate: float
    impl_rate: float
    cost_usd: float

    @classmethod
    def of(cls, aggregate: TierAggregate) -> TierMedians:
        """The medians cross-tier compares, taken from a tier's aggregate."""
        return cls(
            aggregate.composite_score.median,
            aggregate.pass_rate.median,
            aggregate.impl_rate.median,
            aggregate.cost_usd.median,
        )


def cross_tier_report(
    experiment_id: str, aggregates: Mapping[str, TierAggregate], baseline_tier: str = "T0"
) -> CrossTierReport:
    """Uplift of every tier over the baseline, and the spread of the tiers' medians.
    `aggregates` maps tier name to that tier's latest aggregate; it must not be empty."""
    medians = {tier: TierMedians.of(agg) for tier, agg in aggregates.items()}
    return cross_tier_report_from_medians(experiment_id, medians, baseline_tier)


def cross_tier_report_from_medians(
    experiment_id: str, medians: Mapping[str, TierMedians], baseline_tier: str = "T0"
) -> CrossTierReport:
    """The same report from each tier's medians alone (what the streaming worker keeps)."""
    if not medians:
        raise ValueError(f"experiment {experiment_id!r} has no tier aggregates")
    tiers = sorted(medians, key=tier_sort_key)
    ordered = [medians[t] for t in tiers]
    uplift: dict[str, float | None] = {}
    baseline = medians.get(baseline_tier)
    if baseline is not None:
        uplift = {
            t: tier_uplift(medians[t].composite_score, baseline.composite_score)
            for t in tiers
            if t != baseline_tier
        }
    costs = [m.cost_usd for m in ordered]
    return CrossTierReport(
        experiment_id=experiment_id,
        baseline_tier=baseline_tier,
        tiers=tiers,
        tier_uplift=uplift,
        pass_rate_variance=population_variance([m.pass_rate for m in ordered]),
        impl_rate_variance=population_variance([m.impl_rate for m in ordered]),
        cost_variance=population_variance(costs),
        cost_delta=max(costs) - min(costs),
    )
