"""Seed 001's cross-tier metrics of one experiment, over its tiers' current aggregates, and each
tier's difference from the baseline on every run, with intervals that hold together per family
(pass rate, composite)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from schemas.aggregates import TierAggregate
from schemas.common import tier_sort_key
from schemas.cross_tier import CrossTierReport, Difference
from stream_app.metrics.intervals import difference_sequence
from stream_app.metrics.statistics import population_variance


def tier_uplift(tier_score: float, baseline_score: float) -> float | None:
    """(tier - baseline) / baseline; None (undefined) when the baseline scores 0."""
    if baseline_score == 0:
        return None
    return (tier_score - baseline_score) / baseline_score


class TierFigures(NamedTuple):
    """What the cross-tier metrics need of a tier's aggregate: the window's medians, and the
    cumulative counts (None in an aggregate or a stored state from before they were kept)."""

    composite_score: float
    pass_rate: float
    impl_rate: float
    cost_usd: float | None  # None: no run of the tier's window was priced
    runs: int | None = None
    passes: int | None = None
    composite_sum: float | None = None

    @classmethod
    def of(cls, aggregate: TierAggregate) -> TierFigures:
        """The figures cross-tier compares, taken from a tier's aggregate."""
        cumulative = aggregate.cumulative
        return cls(
            aggregate.composite_score.median,
            aggregate.pass_rate.median,
            aggregate.impl_rate.median,
            aggregate.cost_usd.median if aggregate.cost_usd is not None else None,
            cumulative.runs,
            cumulative.passes,
            cumulative.composite_mean * cumulative.runs,
        )


def cross_tier_report(
    experiment_id: str,
    tiers: Mapping[str, TierAggregate | TierFigures],
    baseline_tier: str = "T0",
    confidence: float = 0.95,
) -> CrossTierReport:
    """Uplift of every tier over the baseline, the spread of the tiers' medians, and the
    differences from the baseline. `tiers` maps tier name to that tier's latest aggregate, or to
    its figures alone (what the streaming worker keeps); it must not be empty."""
    figures = {t: f if isinstance(f, TierFigures) else TierFigures.of(f) for t, f in tiers.items()}
    if not figures:
        raise ValueError(f"experiment {experiment_id!r} has no tier aggregates")
    ordered_tiers = sorted(figures, key=tier_sort_key)
    ordered = [figures[t] for t in ordered_tiers]
    uplift: dict[str, float | None] = {}
    baseline = figures.get(baseline_tier)
    if baseline is not None:
        uplift = {
            t: tier_uplift(figures[t].composite_score, baseline.composite_score)
            for t in ordered_tiers
            if t != baseline_tier
        }
    costs = [m.cost_usd for m in ordered if m.cost_usd is not None]  # the priced tiers'
    pass_rate, composite = differences(figures, baseline_tier, confidence)
    return CrossTierReport(
        experiment_id=experiment_id,
        baseline_tier=baseline_tier,
        tiers=ordered_tiers,
        tier_uplift=uplift,
        pass_rate_variance=population_variance([m.pass_rate for m in ordered]),
        impl_rate_variance=population_variance([m.impl_rate for m in ordered]),
        cost_variance=population_variance(costs) if costs else None,
        cost_delta=max(costs) - min(costs) if costs else None,
        pass_rate_difference=pass_rate,
        composite_difference=composite,
        difference_confidence=confidence,
    )


def differences(
    figures: Mapping[str, TierFigures], baseline_tier: str, confidence: float
) -> tuple[dict[str, Difference], dict[str, Difference]]:
    """Pass-rate and composite differences of every non-baseline tier with counts from the
    baseline's. With m such tiers each interval is at 1 - (1 - confidence) / m (Bonferroni), so
    that all of them hold at once with at least `confidence`, at every moment: a tier that joins
    widens the others', never narrows them."""
    baseline = figures.get(baseline_tier)
    if baseline is None or not baseline.runs:
        return {}, {}
    compared = [
        t for t in sorted(figures, key=tier_sort_key) if t != baseline_tier and figures[t].runs
    ]
    each = 1 - (1 - confidence) / max(len(compared), 1)
    pass_rate: dict[str, Difference] = {}
    composite: dict[str, Difference] = {}
    for tier in compared:
        f = figures[tier]
        pass_rate[tier] = _difference(f.passes, f.runs, baseline.passes, baseline.runs, each)
        composite[tier] = _difference(
            f.composite_sum, f.runs, baseline.composite_sum, baseline.runs, each
        )
    return pass_rate, composite


def _difference(
    total: float | None,
    runs: int | None,
    base_total: float | None,
    base_runs: int | None,
    confidence: float,
) -> Difference:
    total, runs = float(total or 0.0), int(runs or 0)
    base_total, base_runs = float(base_total or 0.0), int(base_runs or 0)
    interval = difference_sequence(total, runs, base_total, base_runs, confidence)
    return Difference(
        estimate=total / runs - base_total / base_runs,
        low=interval.low,
        high=interval.high,
        significant=interval.excludes(0.0),
    )
