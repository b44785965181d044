"""The gauges of the latest aggregates and cross-tier reports, in the text exposition format.

A publish writes the aggregate's own lines; a scrape only joins the stored lines, a family at a
time (`web.py`), from a snapshot of each dict taken when it starts. Not prometheus_client's
labelled gauges (a dictionary walk per sample to set and again to render: too slow for thousands
of tiers), nor a render on a thread (docs/operations.md, 'Scrapes that never stall')."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Final, NamedTuple

from prometheus_client.core import GaugeMetricFamily

from schemas.aggregates import DropStatus, Statistics, TierAggregate
from schemas.common import Grade
from schemas.cross_tier import CrossTierReport
from stream_app.metrics.grades import grade_points
from stream_app.service.exported_statistics import (
    DEFAULT_EXPORTED_STATISTICS,
    ExportedStatistics,
    TierField,
)

TIER_STATS: Final[Mapping[TierField, str]] = {
    "pass_rate": "evalstream_tier_pass_rate",
    "impl_rate": "evalstream_tier_impl_rate",
    "composite_score": "evalstream_tier_composite_score",
    "cost_usd": "evalstream_tier_cost_usd",
    "duration_seconds": "evalstream_tier_duration_seconds",
    "cost_of_pass": "evalstream_tier_cost_of_pass_usd",
}
OPTIONAL_STATS: Final[Mapping[TierField, str]] = {
    "code_bleu": "evalstream_tier_code_bleu",
    "test_pass_rate": "evalstream_tier_test_pass_rate",
}
PRICED: Final = frozenset({"cost_usd", "cost_of_pass"})
"""The fields over the window's priced runs only (absent while none is)."""
TIER_FAMILIES: Final[tuple[tuple[str, str], ...]] = (
    *(
        (n, f"{f} statistics over the tier's window" + ("'s priced runs" if f in PRICED else ""))
        for f, n in TIER_STATS.items()
    ),
    *(
        (n, f"{f} statistics over the window's runs that have it")
        for f, n in OPTIONAL_STATS.items()
    ),
    ("evalstream_tier_grade_points", "Grade of the window: A=4 B=3 C=2 D=1 F=0"),
    ("evalstream_tier_window_runs", "Runs in the tier's window"),
    ("evalstream_tier_window_capacity", "Capacity of the tier's window"),
    ("evalstream_tier_pass_at_k", "Unbiased pass@k over the window"),
    (
        "evalstream_tier_dropped",
        "1 while a drop detector has paged and the tier's runs are not back at its reference",
    ),
    (
        "evalstream_tier_drop_evidence_ratio",
        "A drop detector's evidence as a fraction of its threshold, log scale (1 pages); "
        "absent while the tier warms up",
    ),
    ("evalstream_tier_cumulative_runs", "Accepted runs of the tier since its first"),
    (
        "evalstream_tier_cumulative_pass_rate",
        "Pass rate over every run of the tier, with its anytime-valid interval (bound)",
    ),
)
EXPERIMENT_VALUES: Final = {  # name: (report field, help)
    "evalstream_experiment_pass_rate_variance": (
        "pass_rate_variance",
        "Variance of tier median pass rates",
    ),
    "evalstream_experiment_impl_rate_variance": (
        "impl_rate_variance",
        "Variance of tier median impl rates",
    ),
    "evalstream_experiment_cost_variance": (
        "cost_variance",
        "Variance of the priced tiers' median costs",
    ),
    "evalstream_experiment_cost_delta_usd": ("cost_delta", "Max - min of priced tier median costs"),
}
EXPERIMENT_FAMILIES: Final[tuple[tuple[str, str], ...]] = (
    (
        "evalstream_tier_uplift_ratio",
        "(median composite - baseline's) / baseline's; absent when undefined",
    ),
    (
        "evalstream_tier_pass_rate_difference",
        "Cumulative pass rate minus the baseline's, with its interval (bound); the "
        "experiment's pass-rate differences hold all together, anytime",
    ),
    *((name, doc) for name, (_, doc) in EXPERIMENT_VALUES.items()),
)


def number(value: float) -> str:
    """A sample value as the text format writes it."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def label_value(text: str) -> str:
    """A label value escaped as the text format requires."""
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _stats(name: str, labels: str, stats: Statistics | None, which: tuple[str, ...]) -> str:
    if stats is None:
        return ""
    return "".join(
        f'{name}{{{labels},stat="{stat}"}} {number(getattr(stats, stat))}\n' for stat in which
    )


def tier_lines(
    agg: TierAggregate, exported: ExportedStatistics = DEFAULT_EXPORTED_STATISTICS
) -> tuple[str, ...]:
    """One aggregate's lines, one string per family of `TIER_FAMILIES`; of each field's
    statistics, those `exported` names (the series budget)."""
    labels = f'experiment="{label_value(agg.experiment_id)}",tier="{label_value(agg.tier)}"'
    return (
        *(
            _stats(name, labels, getattr(agg, field), exported.get(field, ()))
            for field, name in (*TIER_STATS.items(), *OPTIONAL_STATS.items())
        ),
        f"evalstream_tier_grade_points{{{labels}}} {number(grade_points(agg.grade))}\n",
        f"evalstream_tier_window_runs{{{labels}}} {number(agg.runs)}\n",
        f"evalstream_tier_window_capacity{{{labels}}} {number(agg.capacity)}\n",
        "".join(
            f'evalstream_tier_pass_at_k{{{labels},k="{label_value(k)}"}} {number(v)}\n'
            for k, v in agg.pass_at_k.items()
        ),
        *_drop_lines(labels, agg.drop),
        f"evalstream_tier_cumulative_runs{{{labels}}} {number(agg.cumulative.runs)}\n",
        _bounds(
            "evalstream_tier_cumulative_pass_rate",
            labels,
            agg.cumulative.pass_rate,
            agg.cumulative.pass_rate_interval.low,
            agg.cumulative.pass_rate_interval.high,
        ),
    )


def _bounds(name: str, labels: str, estimate: float, low: float, high: float) -> str:
    """An estimate and its interval, as three samples told apart by `bound`."""
    return "".join(
        f'{name}{{{labels},bound="{bound}"}} {number(value)}\n'
        for bound, value in (("estimate", estimate), ("low", low), ("high", high))
    )


def _drop_lines(labels: str, drop: DropStatus) -> tuple[str, str]:
    """The drop detectors' two families; the evidence absent while the tier warms up."""
    evidence = (
        "".join(
            f'evalstream_tier_drop_evidence_ratio{{{labels},detector="{detector}"}} '
            f"{number(ratio)}\n"
            for detector, ratio in drop.evidence.items()
        )
        if drop.monitoring
        else ""
    )
    return f"evalstream_tier_dropped{{{labels}}} {number(int(drop.dropped))}\n", evidence


def experiment_lines(report: CrossTierReport) -> tuple[str, ...]:
    """One report's lines, one string per family of `EXPERIMENT_FAMILIES`."""
    exp = label_value(report.experiment_id)
    uplift = "".join(
        f'evalstream_tier_uplift_ratio{{experiment="{exp}",tier="{label_value(tier)}"}} '
        f"{number(ratio)}\n"
        for tier in report.tiers
        if (ratio := report.tier_uplift.get(tier)) is not None and math.isfinite(ratio)
    )
    difference = "".join(
        _bounds(
            "evalstream_tier_pass_rate_difference",
            f'experiment="{exp}",tier="{label_value(tier)}"',
            d.estimate,
            d.low,
            d.high,
        )
        for tier, d in report.pass_rate_difference.items()
    )
    return (
        uplift,
        difference,
        *(
            f'{name}{{experiment="{exp}"}} {number(value)}\n'
            if (value := getattr(report, field)) is not None  # the costs, with no tier priced
            else ""
            for name, (field, _) in EXPERIMENT_VALUES.items()
        ),
    )


class TierEntry(NamedTuple):
    """What the worker keeps of a tier's latest aggregate: its gauge lines, its JSON as
    published (for the query API) and the few fields of the experiment list. Strings, numbers
    and bytes only: the garbage collector stops tracking such tuples, so many tiers add no
    pause to its full collections (as many pydantic models made them long enough to stall
    `/healthz`)."""

    lines: tuple[str, ...]
    json: bytes
    grade: Grade
    runs: int
    capacity: int
    composite_median: float
    latest_completed_at: datetime
    dropped: bool


class ExperimentEntry(NamedTuple):
    """An experiment's latest cross-tier report: its gauge lines and its JSON as published."""

    lines: tuple[str, ...]
    json: bytes


class AggregateCollector:
    """The latest aggregate of every tier and report of every experiment this worker owns,
    rendered to lines when published, so that a scrape only joins them."""

    def __init__(self, exported: ExportedStatistics = DEFAULT_EXPORTED_STATISTICS) -> None:
        self.tiers: dict[tuple[str, str], TierEntry] = {}
        self.experiments: dict[str, ExperimentEntry] = {}
        self.exported = exported

    def set_tier(self, agg: TierAggregate, raw: bytes) -> None:
        """Keep a tier's latest aggregate (`raw`: its JSON as published)."""
        self.tiers[(agg.experiment_id, agg.tier)] = TierEntry(
            tier_lines(agg, self.exported),
            raw,
            agg.grade,
            agg.runs,
            agg.capacity,
            agg.composite_score.median,
            agg.latest_completed_at,
            agg.drop.dropped,
        )

    def set_experiment(self, report: CrossTierReport, raw: bytes) -> None:
        """Keep an experiment's latest report (`raw`: its JSON as published)."""
        self.experiments[report.experiment_id] = ExperimentEntry(experiment_lines(report), raw)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families (without samples), for checks of what `/metrics` can carry."""
        for name, doc in (*TIER_FAMILIES, *EXPERIMENT_FAMILIES):
            yield GaugeMetricFamily(name, doc)

    def render(self) -> Iterator[bytes]:
        """The text exposition of every stored aggregate and report, a chunk per family, each
        made when it is asked for: `/metrics` sends one before it makes the next, so the event
        loop is never held for more than one family (a few ms for 35,000 tiers)."""
        per_tier = [entry.lines for entry in list(self.tiers.values())]
        per_experiment = [entry.lines for entry in list(self.experiments.values())]
        for families, rows in ((TIER_FAMILIES, per_tier), (EXPERIMENT_FAMILIES, per_experiment)):
            for i, (name, doc) in enumerate(families):
                head = f"# HELP {name} {doc}\n# TYPE {name} gauge\n"
                yield (head + "".join([row[i] for row in rows])).encode()
