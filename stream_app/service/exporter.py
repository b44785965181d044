"""Prometheus metrics of one worker. Gauges describe only the keys this worker owns; the app
removes a key's series when its partition moves to another worker, so a query never sees the
same tier twice."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Final, NamedTuple, get_args

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from schemas.aggregates import TierAggregate
from schemas.common import RejectReason
from schemas.cross_tier import CrossTierReport
from schemas.suites import SuiteTier
from stream_app.service.aggregate_collector import AggregateCollector
from stream_app.service.exported_statistics import (
    DEFAULT_EXPORTED_STATISTICS,
    ExportedStatistics,
)

REJECT_REASONS: Final[tuple[RejectReason, ...]] = get_args(RejectReason)
CONTENT_TYPE: Final = (
    CONTENT_TYPE_LATEST.split(";", 1)[0] + "; version=0.0.4"
)  # aiohttp: no charset


class ConsumerLag(Collector):
    """Messages behind the high watermark per assigned source partition, replaced as a whole by
    each refresh: a scrape (on its own thread) sees the old set or the new one, never a gap."""

    def __init__(self) -> None:
        self.lags: dict[tuple[str, int], int] = {}
        self.measured = False
        """Whether `lags` was measured yet (a worker that just started does not know)."""

    def replace(self, lags: dict[tuple[str, int], int]) -> None:
        """The new figures, swapped in at once."""
        self.lags = lags
        self.measured = True

    def behind(self, topics: set[str], tolerance: int) -> bool:
        """More than `tolerance` messages wait on `topics` for this worker, or it does not
        know yet."""
        if not self.measured:
            return True
        behind = sum(lag for (topic, _), lag in self.lags.items() if topic in topics)  # ints
        return behind > tolerance

    def collect(self) -> Iterator[Metric]:
        """The family with a sample per assigned partition."""
        family = GaugeMetricFamily(
            "evalstream_consumer_lag_messages",
            "Messages behind the partition's high watermark, per assigned source partition",
            labels=["topic", "partition"],
        )
        for (topic, partition), lag in self.lags.items():
            family.add_metric([topic, str(partition)], lag)
        yield family


class TableKeys(Collector):
    """The keys each table holds in this worker's memory, and the decoded states its stage
    caches, counted at each scrape: what retirement must empty (a retired key left is seen)."""

    def __init__(self) -> None:
        self.tables: dict[str, tuple[Callable[[], int], Callable[[], int]]] = {}

    def watch(self, table: str, keys: Callable[[], int], cached: Callable[[], int]) -> None:
        """Count `table`'s keys with `keys`, its stage's cached states with `cached`."""
        self.tables[table] = (keys, cached)

    def collect(self) -> Iterator[Metric]:
        """The two families, a sample per table."""
        held = GaugeMetricFamily(
            "evalstream_table_keys",
            "Keys a table holds on this worker (RocksDB's estimate when on disk)",
            labels=["table"],
        )
        cached = GaugeMetricFamily(
            "evalstream_table_cached_keys",
            "Decoded states of a table's keys its stage caches",
            labels=["table"],
        )
        for table, (keys, states) in self.tables.items():
            held.add_metric([table], keys())
            cached.add_metric([table], states())
        yield from (held, cached)


SUITE_FAMILIES: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (  # name, help, labels
    (
        "evalstream_suite_dropped",
        "1 while a suite tier's drop detectors have paged (a threshold reached within their "
        "windows), else 0",
        ("suite", "tier"),
    ),
    (
        "evalstream_suite_drop_evidence_ratio",
        "A suite tier's drop detector's evidence as a fraction of its threshold, log scale "
        "(1: a threshold reached): the larger of its pooled and sparse statistics', each "
        "against its own threshold",
        ("suite", "tier", "detector"),
    ),
    (
        "evalstream_suite_experiments",
        "Experiments whose runs the suite tier counts",
        ("suite", "tier"),
    ),
    ("evalstream_suite_runs", "Runs the suite tier counted", ("suite", "tier")),
    (
        "evalstream_suite_experiments_paired",
        "Experiments the suite tier's difference from the baseline covers (for the baseline, "
        "the experiments it has runs in)",
        ("suite", "tier"),
    ),
    (
        "evalstream_suite_pass_rate",
        "The suite tier's pass rate, each experiment weighing the same, with its interval "
        "(bound), anytime",
        ("suite", "tier", "bound"),
    ),
    (
        "evalstream_suite_pass_rate_difference",
        "The suite tier's pass rate minus the baseline's, paired by experiment, with its "
        "interval (bound); a suite's differences hold all together, anytime",
        ("suite", "tier", "bound"),
    ),
    (
        "evalstream_suite_mean_composite",
        "The suite tier's mean composite score, each experiment weighing the same, with its "
        "interval (bound), anytime",
        ("suite", "tier", "bound"),
    ),
    (
        "evalstream_suite_mean_composite_difference",
        "The suite tier's mean composite minus the baseline's, paired by experiment, with its "
        "interval (bound); a suite's composite differences hold all together, anytime",
        ("suite", "tier", "bound"),
    ),
)


class SuiteEntry(NamedTuple):
    """What the worker keeps of a suite tier's latest report: the report, and its JSON as
    published."""

    report: SuiteTier
    json: bytes


class SuiteCollector(Collector):
    """The latest report of every suite tier this worker owns, as gauges labelled `suite` and
    `tier`: 12 series per suite tier (`dropped`, two `drop_evidence_ratio`, `experiments`,
    `runs`, `experiments_paired`, and the three bounds of `pass_rate` and of
    `pass_rate_difference`; 9 for the baseline). A suite is an agent, so there are few: the
    families are made at each scrape, from a snapshot of the dict taken when it starts."""

    def __init__(self) -> None:
        self.suites: dict[tuple[str, str], SuiteEntry] = {}

    def collect(self) -> Iterator[Metric]:
        """The families, a sample per suite tier (per detector, per bound)."""
        families = [
            GaugeMetricFamily(name, doc, labels=labels) for name, doc, labels in SUITE_FAMILIES
        ]
        dropped, evidence, experiments, runs, paired, *figures = families
        for (suite, tier), entry in list(self.suites.items()):
            report = entry.report
            dropped.add_metric([suite, tier], int(report.drop.dropped))
            for detector, ratio in report.drop.evidence.items():
                evidence.add_metric([suite, tier, detector], ratio)
            experiments.add_metric([suite, tier], report.experiments_with_runs)
            runs.add_metric([suite, tier], report.runs)
            paired.add_metric([suite, tier], report.experiments)
            shown = (
                report.pass_rate,
                report.pass_rate_difference,
                report.mean_composite,
                report.mean_composite_difference,
            )
            for family, figure in zip(figures, shown, strict=True):
                if figure is not None:
                    for bound in ("estimate", "low", "high"):
                        family.add_metric([suite, tier, bound], getattr(figure, bound))
        yield from families


class Exporter:
    """The Prometheus metrics of one worker, in a registry of its own (not the global one)."""

    def __init__(
        self,
        version: str,
        exported_statistics: ExportedStatistics = DEFAULT_EXPORTED_STATISTICS,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        gauge = partial(Gauge, registry=self.registry)
        counter = partial(Counter, registry=self.registry)
        tier = ["experiment", "tier"]
        self.aggregates = AggregateCollector(
            exported_statistics
        )  # rendered by `render`, beside the registry
        self.received = counter("evalstream_runs_received", "Messages read from the input topic")
        self.accepted = counter(
            "evalstream_runs_accepted", "Runs that entered a window whose new state was saved"
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
        self.suite_waits = counter(
            "evalstream_latency_path_wait_seconds",
            "Seconds the suite hop waited for gaps between the latency path's batches",
        )
        self.retired = counter(
            "evalstream_experiments_retired",
            "Experiments retired after experiment_idle_ttl without an accepted run",
        )
        self.experiments = gauge(
            "evalstream_experiments", "Experiments with windows on this worker (its partitions)"
        )
        self.restoring = gauge(
            "evalstream_gauges_restoring_keys",
            "Stored keys of newly owned partitions whose gauges are yet to be restored from the "
            "table, after the worker is ready (0 once every gauge is back)",
            ["table"],
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
        self.batch_size = Histogram(
            "evalstream_batch_records",
            "Records per batch a stage took: what was waiting, up to its bound (one while the "
            "input is quiet, thousands under a backlog)",
            ["stage"],
            buckets=(1, 2, 5, 10, 50, 100, 500, 1000, 5000, 10000),
            registry=self.registry,
        )
        self.run_age = Histogram(
            "evalstream_run_age_seconds",
            "Processing time minus the run's completed_at",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 86400),
            registry=self.registry,
        )
        self.gc_pause = Histogram(
            "evalstream_gc_pause_seconds",
            "Pauses of the garbage collector's generations 1 and 2 (every thread waits)",
            ["generation"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=self.registry,
        )
        self.consumer_lag = ConsumerLag()
        self.registry.register(self.consumer_lag)
        self.suites = SuiteCollector()
        self.registry.register(self.suites)
        self.table_keys = TableKeys()
        self.registry.register(self.table_keys)
        self.build_info = gauge("evalstream_build_info", "evalstream's version", ["version"])
        self.build_info.labels(version=version).set(1)
        for reason in REJECT_REASONS:
            self.rejected.labels(reason=reason)
        for ignored in ("duplicate", "late"):
            self.ignored.labels(reason=ignored)

    def watch_gc(self) -> None:
        """Time the garbage collector's older-generation collections into `gc_pause` (a full
        collection stops the event loop, `/healthz` included, for as long as it lasts). The
        youngest generation's, thousands a second under load and short, are not timed."""
        started: list[float] = [0.0]
        children = [self.gc_pause.labels(generation=str(g)) for g in range(3)]

        def callback(phase: str, info: dict[str, int]) -> None:
            generation = info["generation"]
            if generation == 0:
                return
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                children[generation].observe(time.perf_counter() - started[0])

        gc.callbacks.append(callback)

    def declare(self, stages: Iterable[str], tables: Iterable[str]) -> None:
        """Create the per-stage and per-table series at 0, so that rates exist before traffic."""
        for stage in stages:
            self.processing.labels(stage=stage)
            self.batch_size.labels(stage=stage)
        for table in tables:
            self.quarantined.labels(table=table)
            self.restoring.labels(table=table)

    def set_tier(self, agg: TierAggregate) -> None:
        """Mirror a tier's latest aggregate in its gauges."""
        self.aggregates.set_tier(agg)

    def remove_tier(self, experiment_id: str, tier: str) -> None:
        """Drop a tier's series, its counters' too: another worker owns it now, or it retired."""
        self.aggregates.tiers.pop((experiment_id, tier), None)
        for direction in ("drop", "rise"):
            self.grade_changes.remove(experiment_id, tier, direction)

    def set_experiment(self, report: CrossTierReport) -> None:
        """Mirror an experiment's latest cross-tier report in its gauges."""
        self.aggregates.set_experiment(report)

    def remove_experiment(self, experiment_id: str) -> None:
        """Drop an experiment's series: another worker owns it now."""
        self.aggregates.experiments.pop(experiment_id, None)

    def set_suite(self, report: SuiteTier, raw: bytes | None = None) -> None:
        """Mirror a suite tier's latest report (`raw`: its JSON as published) in its gauges."""
        self.suites.suites[(report.suite, report.tier)] = SuiteEntry(
            report, raw if raw is not None else report.model_dump_json().encode()
        )

    def remove_suite(self, suite: str, tier: str) -> None:
        """Drop a suite tier's series: another worker owns it now, or it was quarantined."""
        self.suites.suites.pop((suite, tier), None)

    def families(self) -> Iterator[Metric]:
        """Every metric family `/metrics` can carry (the aggregates' without samples)."""
        yield from self.collect()
        yield from self.aggregates.describe()

    def collect(self) -> Iterator[Metric]:
        """The registry's families without the `_created` series of counters and histograms:
        they would double those series, and nothing reads them (Prometheus spots counter resets
        itself). Left out here rather than by prometheus_client's process-wide switch, which
        would change every other registry of the process too; the worker's own process turns
        them off at start as well (`commands/worker.py`), so that they are not made at all."""
        for family in self.registry.collect():
            created = f"{family.name}_created"
            family.samples = [sample for sample in family.samples if sample.name != created]
            yield family

    def render_chunks(self) -> Iterator[bytes]:
        """The text exposition format in chunks (the registry's, then the aggregates' a family,
        or a few thousand keys of one, at a time), each made when asked for, for `/metrics` to
        send one at a time."""
        yield generate_latest(self)
        yield from self.aggregates.render()

    def render(self) -> bytes:
        """The whole text exposition at once."""
        return b"".join(self.render_chunks())
