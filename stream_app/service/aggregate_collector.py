"""The gauges of the latest aggregates and cross-tier reports, rendered when Prometheus scrapes.

Setting ~45 labelled gauges on every published aggregate made the exporter one of the worker's
hot paths, for values that only matter when scraped, and prometheus_client's generic renderer
takes ~5 µs a sample (1.5 s for 1,000 experiments of 7 tiers). Here a publish stores the
aggregate (one dict write); a scrape writes the text exposition of every stored aggregate
itself, and keeps each key's lines until its aggregate changes, so a scrape re-renders only the
keys published since the last one.

`render` runs on a thread (see `web.py`) while the event loop publishes: it reads a snapshot of
each dict (one C-level copy under the GIL), the stored models are never mutated, and a lock
keeps two scrapes from writing the line cache at once."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any, Final

from prometheus_client.core import GaugeMetricFamily

from schemas.aggregates import Statistics, TierAggregate
from schemas.cross_tier import CrossTierReport
from stream_app.metrics.grades import grade_points

STATS: Final = ("median", "mean", "mode", "min", "max", "std_dev")
DEFAULT_EXPORTED_STATISTICS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "pass_rate": ("mean",),
        "impl_rate": ("mean",),
        "composite_score": ("median",),
        "cost_usd": ("median",),
        "duration_seconds": ("median",),
        "cost_of_pass": ("median",),
        "code_bleu": ("median",),
        "test_pass_rate": ("mean",),
    }
)
"""The series budget: one statistic per field, the one the dashboards and alert rules read (a
rate's mean is the share of runs; a score's or cost's median resists outliers). The setting
`exported_statistics` selects others; every statistic is on the aggregates topic and in the
query API whatever is exported."""
TIER_STATS: Final = {
    "pass_rate": "evalstream_tier_pass_rate",
    "impl_rate": "evalstream_tier_impl_rate",
    "composite_score": "evalstream_tier_composite_score",
    "cost_usd": "evalstream_tier_cost_usd",
    "duration_seconds": "evalstream_tier_duration_seconds",
    "cost_of_pass": "evalstream_tier_cost_of_pass_usd",
}
OPTIONAL_STATS: Final = {
    "code_bleu": "evalstream_tier_code_bleu",
    "test_pass_rate": "evalstream_tier_test_pass_rate",
}
TIER_FAMILIES: Final[tuple[tuple[str, str], ...]] = (
    *((n, f"{f} statistics over the tier's window") for f, n in TIER_STATS.items()),
    *(
        (n, f"{f} statistics over the window's runs that have it")
        for f, n in OPTIONAL_STATS.items()
    ),
    ("evalstream_tier_grade_points", "Grade of the window: A=4 B=3 C=2 D=1 F=0"),
    ("evalstream_tier_window_runs", "Runs in the tier's window"),
    ("evalstream_tier_window_capacity", "Capacity of the tier's window"),
    ("evalstream_tier_pass_at_k", "Unbiased pass@k over the window"),
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
    "evalstream_experiment_cost_variance": ("cost_variance", "Variance of tier median costs"),
    "evalstream_experiment_cost_delta_usd": ("cost_delta", "Max - min of tier median costs"),
}
EXPERIMENT_FAMILIES: Final[tuple[tuple[str, str], ...]] = (
    (
        "evalstream_tier_uplift_ratio",
        "(median composite - baseline's) / baseline's; absent when undefined",
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
    agg: TierAggregate, exported: Mapping[Any, tuple[str, ...]] = DEFAULT_EXPORTED_STATISTICS
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
    )


def experiment_lines(report: CrossTierReport) -> tuple[str, ...]:
    """One report's lines, one string per family of `EXPERIMENT_FAMILIES`."""
    exp = label_value(report.experiment_id)
    uplift = "".join(
        f'evalstream_tier_uplift_ratio{{experiment="{exp}",tier="{label_value(tier)}"}} '
        f"{number(ratio)}\n"
        for tier in report.tiers
        if (ratio := report.tier_uplift.get(tier)) is not None and math.isfinite(ratio)
    )
    return (
        uplift,
        *(
            f'{name}{{experiment="{exp}"}} {number(getattr(report, field))}\n'
            for name, (field, _) in EXPERIMENT_VALUES.items()
        ),
    )


class _Lines:
    """The rendered lines of each key, kept while its value is the same object."""

    def __init__(self, render: Callable[[Any], tuple[str, ...]]) -> None:
        self.render = render
        self.cache: dict[Any, tuple[Any, tuple[str, ...]]] = {}

    def of(self, current: dict[Any, Any]) -> list[tuple[str, ...]]:
        cache = self.cache
        for gone in cache.keys() - current.keys():
            del cache[gone]
        out = []
        for key, value in current.items():
            hit = cache.get(key)
            if hit is None or hit[0] is not value:
                hit = (value, self.render(value))
                cache[key] = hit
            out.append(hit[1])
        return out


class AggregateCollector:
    """The latest aggregate of every tier and report of every experiment this worker owns."""

    def __init__(
        self, exported: Mapping[Any, tuple[str, ...]] = DEFAULT_EXPORTED_STATISTICS
    ) -> None:
        self.tiers: dict[tuple[str, str], TierAggregate] = {}
        self.experiments: dict[str, CrossTierReport] = {}
        self._tier_lines = _Lines(partial(tier_lines, exported=exported))
        self._experiment_lines = _Lines(experiment_lines)
        self._lock = threading.Lock()

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families (without samples), for checks of what `/metrics` can carry."""
        for name, doc in (*TIER_FAMILIES, *EXPERIMENT_FAMILIES):
            yield GaugeMetricFamily(name, doc)

    def render(self) -> list[bytes]:
        """The text exposition of every stored aggregate and report, a chunk per family."""
        tiers, experiments = dict(self.tiers), dict(self.experiments)
        with self._lock:
            per_tier = self._tier_lines.of(tiers)
            per_experiment = self._experiment_lines.of(experiments)
        chunks: list[bytes] = []  # one per family: no single long join or encode holds the GIL
        for families, rows in ((TIER_FAMILIES, per_tier), (EXPERIMENT_FAMILIES, per_experiment)):
            for i, (name, doc) in enumerate(families):
                head = f"# HELP {name} {doc}\n# TYPE {name} gauge\n"
                chunks.append((head + "".join(row[i] for row in rows)).encode())
        return chunks
