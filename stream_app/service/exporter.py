"""Prometheus metrics of one worker. Gauges describe only the keys this worker owns; the app
removes a key's series when its partition moves to another worker, so a query never sees the
same tier twice."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from functools import partial
from typing import Any, Final, get_args

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from schemas.aggregates import Statistics, TierAggregate
from schemas.common import RejectReason
from schemas.cross_tier import CrossTierReport
from stream_app.metrics.grades import grade_points

STATS: Final = ("median", "mean", "mode", "min", "max", "std_dev")
REJECT_REASONS: Final[tuple[RejectReason, ...]] = get_args(RejectReason)
TIER_STAT_GAUGES: Final = {
    "pass_rate": "evalstream_tier_pass_rate",
    "impl_rate": "evalstream_tier_impl_rate",
    "composite_score": "evalstream_tier_composite_score",
    "cost_usd": "evalstream_tier_cost_usd",
    "duration_seconds": "evalstream_tier_duration_seconds",
    "cost_of_pass": "evalstream_tier_cost_of_pass_usd",
}
OPTIONAL_STAT_GAUGES: Final = {
    "code_bleu": "evalstream_tier_code_bleu",
    "test_pass_rate": "evalstream_tier_test_pass_rate",
}
CONTENT_TYPE: Final = (
    CONTENT_TYPE_LATEST.split(";", 1)[0] + "; version=0.0.4"
)  # aiohttp: no charset


class Exporter:
    """The Prometheus metrics of one worker, in a registry of its own (not the global one)."""

    def __init__(self, version: str, k_values: Iterable[int] = (1, 5, 10)) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._tier_cache: dict[tuple[str, str], dict[str, Any]] = {}
        self._optional_present: set[tuple[str, str, str]] = set()
        self.k_values = tuple(str(k) for k in k_values)
        gauge = partial(Gauge, registry=self.registry)
        counter = partial(Counter, registry=self.registry)
        tier, exp = ["experiment", "tier"], ["experiment"]
        self.stat_gauges = {
            field: gauge(name, f"{field} statistics over the tier's window", [*tier, "stat"])
            for field, name in TIER_STAT_GAUGES.items()
        }
        self.optional_stat_gauges = {
            field: gauge(
                name, f"{field} statistics over the window's runs that have it", [*tier, "stat"]
            )
            for field, name in OPTIONAL_STAT_GAUGES.items()
        }
        self.grade_points = gauge(
            "evalstream_tier_grade_points", "Grade of the window: A=4 B=3 C=2 D=1 F=0", tier
        )
        self.window_runs = gauge("evalstream_tier_window_runs", "Runs in the tier's window", tier)
        self.window_capacity = gauge(
            "evalstream_tier_window_capacity", "Capacity of the tier's window", tier
        )
        self.pass_at_k = gauge(
            "evalstream_tier_pass_at_k", "Unbiased pass@k over the window", [*tier, "k"]
        )
        self.uplift = gauge(
            "evalstream_tier_uplift_ratio",
            "(median composite - baseline's) / baseline's; absent when undefined",
            tier,
        )
        self.pass_rate_variance = gauge(
            "evalstream_experiment_pass_rate_variance", "Variance of tier median pass rates", exp
        )
        self.impl_rate_variance = gauge(
            "evalstream_experiment_impl_rate_variance", "Variance of tier median impl rates", exp
        )
        self.cost_variance = gauge(
            "evalstream_experiment_cost_variance", "Variance of tier median costs", exp
        )
        self.cost_delta = gauge(
            "evalstream_experiment_cost_delta_usd", "Max - min of tier median costs", exp
        )
        self.received = counter("evalstream_runs_received", "Messages read from the input topic")
        self.accepted = counter(
            "evalstream_runs_accepted", "Runs that entered a window whose new state was saved", tier
        )
        self.rejected = counter("evalstream_runs_rejected", "Messages dead-lettered", ["reason"])
        self.ignored = counter(
            "evalstream_runs_ignored", "Valid runs that changed nothing", ["reason"]
        )
        self.quarantined = counter(
            "evalstream_state_quarantined",
            "Stored states that could not be loaded or aggregated, dead-lettered and reset",
            ["table"],
        )
        self.grade_changes = counter(
            "evalstream_grade_changes", "Full-window grade changes", [*tier, "direction"]
        )
        self.processing = Histogram(
            "evalstream_processing_seconds",
            "Processing time of one event per stage",
            ["stage"],
            buckets=(
                0.0001,
                0.00025,
                0.0005,
                0.001,
                0.0025,
                0.005,
                0.01,
                0.025,
                0.05,
                0.1,
                0.5,
                1.0,
            ),
            registry=self.registry,
        )
        self.run_age = Histogram(
            "evalstream_run_age_seconds",
            "Processing time minus the run's completed_at",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 86400),
            registry=self.registry,
        )
        self.consumer_lag = gauge(
            "evalstream_consumer_lag_messages",
            "Messages behind the partition's high watermark, per assigned source partition",
            ["topic", "partition"],
        )
        self.build_info = gauge("evalstream_build_info", "evalstream's version", ["version"])
        self.build_info.labels(version=version).set(1)
        for reason in REJECT_REASONS:
            self.rejected.labels(reason=reason)
        for ignored in ("duplicate", "late"):
            self.ignored.labels(reason=ignored)

    def declare(self, stages: Iterable[str], tables: Iterable[str]) -> None:
        """Create the per-stage and per-table series at 0, so that rates exist before traffic."""
        for stage in stages:
            self.processing.labels(stage=stage)
        for table in tables:
            self.quarantined.labels(table=table)

    def _tier_children(self, labels: tuple[str, str]) -> dict[str, Any]:
        """The labelled gauges of one tier, looked up once: `labels()` validates its arguments
        on every call, which made gauge updates the worker's hottest path."""
        children = self._tier_cache.get(labels)
        if children is None:
            children = {
                f"{field}:{stat}": gauge.labels(*labels, stat)
                for field, gauge in self.stat_gauges.items()
                for stat in STATS
            }
            children["grade"] = self.grade_points.labels(*labels)
            children["runs"] = self.window_runs.labels(*labels)
            children["capacity"] = self.window_capacity.labels(*labels)
            self._tier_cache[labels] = children
        return children

    def set_tier(self, agg: TierAggregate) -> None:
        """Mirror a tier's latest aggregate in its gauges."""
        labels = (agg.experiment_id, agg.tier)
        children = self._tier_children(labels)
        for field in self.stat_gauges:
            stats: Statistics = getattr(agg, field)
            for stat in STATS:
                children[f"{field}:{stat}"].set(getattr(stats, stat))
        for field, gauge in self.optional_stat_gauges.items():
            optional: Statistics | None = getattr(agg, field)
            present = (field, *labels)
            if optional is not None:
                for stat in STATS:
                    gauge.labels(*labels, stat).set(getattr(optional, stat))
                self._optional_present.add(present)
            elif present in self._optional_present:  # removing is costly: only what was set
                for stat in STATS:
                    _remove(gauge, *labels, stat)
                self._optional_present.discard(present)
        children["grade"].set(grade_points(agg.grade))
        children["runs"].set(agg.runs)
        children["capacity"].set(agg.capacity)
        for k, value in agg.pass_at_k.items():
            self.pass_at_k.labels(*labels, k).set(value)

    def remove_tier(self, experiment_id: str, tier: str) -> None:
        """Drop a tier's series: another worker owns it now."""
        labels = (experiment_id, tier)
        self._tier_cache.pop(labels, None)
        for field in self.optional_stat_gauges:
            self._optional_present.discard((field, *labels))
        for gauge in [*self.stat_gauges.values(), *self.optional_stat_gauges.values()]:
            for stat in STATS:
                _remove(gauge, *labels, stat)
        for gauge in (self.grade_points, self.window_runs, self.window_capacity):
            _remove(gauge, *labels)
        for k in self.k_values:
            _remove(self.pass_at_k, *labels, k)

    def set_experiment(self, report: CrossTierReport) -> None:
        """Mirror an experiment's latest cross-tier report in its gauges."""
        exp = report.experiment_id
        self.pass_rate_variance.labels(exp).set(report.pass_rate_variance)
        self.impl_rate_variance.labels(exp).set(report.impl_rate_variance)
        self.cost_variance.labels(exp).set(report.cost_variance)
        self.cost_delta.labels(exp).set(report.cost_delta)
        for tier in report.tiers:
            uplift = report.tier_uplift.get(tier)
            if uplift is None or not math.isfinite(uplift):
                _remove(self.uplift, exp, tier)
            else:
                self.uplift.labels(exp, tier).set(uplift)

    def remove_experiment(self, experiment_id: str, tiers: Iterable[str]) -> None:
        """Drop an experiment's series: another worker owns it now."""
        for gauge in (
            self.pass_rate_variance,
            self.impl_rate_variance,
            self.cost_variance,
            self.cost_delta,
        ):
            _remove(gauge, experiment_id)
        for tier in tiers:
            _remove(self.uplift, experiment_id, tier)

    def render(self) -> bytes:
        """The text exposition format, for `/metrics`."""
        return generate_latest(self.registry)


def _remove(gauge: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)
