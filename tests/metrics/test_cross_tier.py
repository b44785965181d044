import math

import pytest

from schemas import Statistics, TierAggregate
from schemas.aggregates import ConfidenceInterval
from stream_app.core.aggregation import cumulative_stats, drop_status
from stream_app.core.config import CoreConfig
from stream_app.core.drop_detector import DropState
from stream_app.core.totals import Totals, units
from stream_app.metrics.cross_tier import (
    TierFigures,
    cross_tier_report,
    tier_uplift,
)


def stats(value: float) -> Statistics:
    return Statistics(
        median=value, mean=value, mode=value, min=value, max=value, std_dev=0.0, count=10
    )


def aggregate(
    tier: str,
    composite: float,
    pass_rate: float = 1.0,
    impl: float = 0.8,
    cost: float = 0.1,
    *,
    totals: Totals | None = None,
) -> TierAggregate:
    totals = totals or Totals(10, round(10 * pass_rate), 10 * units(composite))
    return TierAggregate(
        experiment_id="e",
        tier=tier,
        runs=10,
        capacity=10,
        run_ids=[f"{tier}-{i}" for i in range(10)],
        latest_completed_at="2026-01-01T00:00:00Z",
        pass_rate=stats(pass_rate),
        impl_rate=stats(impl),
        cost_usd=stats(cost),
        duration_seconds=stats(60.0),
        cost_of_pass=stats(cost),
        composite_score=stats(composite),
        grade="C",
        pass_at_k={"1": pass_rate},
        pass_rate_interval=ConfidenceInterval(low=0.0, high=1.0),
        cumulative=cumulative_stats(totals, 0.95),
        drop=drop_status(DropState(), CoreConfig()),
    )


def test_seed_example_3() -> None:
    composites = {"T0": 0.70, "T1": 0.80, "T2": 0.85, "T3": 0.90}
    report = cross_tier_report("e", {t: aggregate(t, c, impl=c) for t, c in composites.items()})
    assert report.tier_uplift["T1"] == pytest.approx(0.142857, abs=1e-6)
    assert report.tier_uplift["T2"] == pytest.approx(0.214286, abs=1e-6)
    assert report.tier_uplift["T3"] == pytest.approx(0.285714, abs=1e-6)
    assert "T0" not in report.tier_uplift
    assert report.impl_rate_variance == pytest.approx(0.00546875, abs=1e-12)


def test_tiers_sort_numerically() -> None:
    report = cross_tier_report("e", {t: aggregate(t, 0.5) for t in ["T10", "T2", "T0", "T1"]})
    assert report.tiers == ["T0", "T1", "T2", "T10"]
    assert list(report.tier_uplift) == ["T1", "T2", "T10"]


def test_uplift_undefined_when_baseline_scores_zero() -> None:
    assert tier_uplift(0.5, 0.0) is None
    report = cross_tier_report("e", {"T0": aggregate("T0", 0.0), "T1": aggregate("T1", 0.5)})
    assert report.tier_uplift == {"T1": None}
    assert report.model_dump_json().count('"T1":null') == 1


def test_no_baseline_yet_gives_empty_uplift() -> None:
    report = cross_tier_report("e", {"T1": aggregate("T1", 0.5), "T2": aggregate("T2", 0.7)})
    assert report.tier_uplift == {}


def test_variances_and_cost_delta() -> None:
    report = cross_tier_report(
        "e",
        {
            "T0": aggregate("T0", 0.5, pass_rate=0.0, cost=0.10),
            "T1": aggregate("T1", 0.5, pass_rate=1.0, cost=0.30),
        },
    )
    assert report.pass_rate_variance == 0.25
    assert report.cost_variance == pytest.approx(0.01)
    assert report.cost_delta == pytest.approx(0.20)


def test_single_tier_has_zero_spread() -> None:
    report = cross_tier_report("e", {"T0": aggregate("T0", 0.5)})
    assert (report.pass_rate_variance, report.cost_variance, report.cost_delta) == (0.0, 0.0, 0.0)
    assert report.tier_uplift == {}
    assert not math.isnan(report.impl_rate_variance)


def test_custom_baseline() -> None:
    report = cross_tier_report(
        "e", {"T0": aggregate("T0", 0.4), "T1": aggregate("T1", 0.5)}, baseline_tier="T1"
    )
    assert report.tier_uplift == {"T0": pytest.approx(-0.2)}


def test_an_infinite_uplift_is_written_as_the_schema_allows() -> None:
    """A baseline that scores almost nothing makes an uplift past the float range: "Infinity"."""
    import json

    from schemas.export import JSON_DIR

    report = cross_tier_report(
        "e", {"T0": TierFigures(5e-324, 0, 1e-323, 1), "T1": TierFigures(0.9, 1, 0.8, 1)}
    )
    written = json.loads(report.model_dump_json())
    assert written["tier_uplift"] == {"T1": "Infinity"}
    schema = json.loads((JSON_DIR / "cross-tier-report.schema.json").read_text())
    allowed = json.dumps(schema["properties"]["tier_uplift"])
    assert "Infinity" in allowed


def test_differences_on_every_run_with_simultaneous_intervals() -> None:
    """Pass rates 0.5 (T0), 0.7 (T1) and 0.52 (T2) over 400 runs each: T1 is significantly
    better, T2 is not; each interval is at 1 - 0.05/2 (two comparisons), and a third tier widens
    them."""

    def tier(name: str, passes: int) -> TierAggregate:
        return aggregate(name, 0.7, totals=Totals(400, passes, units(0.5) * 400 + passes))

    two = cross_tier_report(
        "e", {"T0": tier("T0", 200), "T1": tier("T1", 280), "T2": tier("T2", 208)}
    )
    t1, t2 = two.pass_rate_difference["T1"], two.pass_rate_difference["T2"]
    assert t1.estimate == pytest.approx(0.2)
    assert t1.significant
    assert t1.low > 0
    assert t1.high > t1.estimate
    assert not t2.significant
    assert t2.low < 0 < t2.high
    assert set(two.composite_difference) == {"T1", "T2"}
    assert two.difference_confidence == 0.95
    three = cross_tier_report(
        "e",
        {"T0": tier("T0", 200), "T1": tier("T1", 280), "T2": tier("T2", 208), "T3": tier("T3", 0)},
    )
    wider = three.pass_rate_difference["T1"]
    assert wider.low < t1.low
    assert wider.high > t1.high
    assert wider.estimate == t1.estimate


def test_no_differences_without_a_baseline_or_counts() -> None:
    assert cross_tier_report("e", {"T1": aggregate("T1", 0.5)}).pass_rate_difference == {}
    old = cross_tier_report(
        "e", {"T0": TierFigures(0.5, 1, 0.5, 1), "T1": TierFigures(0.6, 1, 0.5, 1)}
    )
    assert old.pass_rate_difference == {}
    assert old.composite_difference == {}
