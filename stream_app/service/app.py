"""The Faust application: a thin shell around the pure core.

Topology (topic names from `Settings.topics`):

    run-completed (raw bytes)
      └─ agent `validate`: core validation and per-run metrics
           ├─ rejected → run-completed.dlq (DeadLetter with the original bytes)
           └─ accepted → evalstream-runs-by-tier (RunMetrics, key experiment/tier)
                └─ agent `window`: table `tier-windows` (TierState per key)
                     ├─ tier-aggregates (TierAggregate, key experiment/tier,
                     │                   partitioned by experiment)
                     │    └─ agent `cross_tier`: table `experiment-tiers`
                     │         └─ cross-tier-reports (CrossTierReport, key experiment)
                     └─ grade-changes (GradeChange, key experiment/tier)

Each hop is a stage class (`stages/`) that knows nothing of Faust: it takes a batch of records,
reads and writes a table-like mapping and publishes through `Outputs`. This module only composes
them: topics, tables, one agent per stage (`batches.run_batches`), recovery and revoke hooks, the
consumer-lag timer and the web pages. Delivery is at-least-once: a batch is acknowledged after it
was processed and Faust flushes the producer before it commits an offset, so a crash redelivers;
the windows drop the redelivered runs (see `stages/windows.py` for the two rules that make the
outputs converge to `replay` through any crash).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Awaitable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

import faust
from faust.app import BootStrategy
from faust.types import ServiceT, StreamT

from stream_app import __version__
from stream_app.core.window import to_epoch_us
from stream_app.service.batches import Stage, run_batches, stop_fatally
from stream_app.service.exporter import Exporter
from stream_app.service.kafka_client import client_kwargs, faust_credentials
from stream_app.service.kafka_compat import (
    ChangelogTable,
    consumer_lag,
    install_consumer_positions,
    install_eager_delivery,
    install_fetch_highwaters,
    install_fetch_wait,
    owned_partitions,
)
from stream_app.service.outputs import Outputs
from stream_app.service.query_api import QueryAnswers, QueryApi
from stream_app.service.quiet_monitor import QuietMonitor
from stream_app.service.settings import (
    MESSAGE_OVERHEAD_BYTES,
    PRODUCER_MAX_REQUEST_BYTES,
    Settings,
)
from stream_app.service.stages.cross_tier import CrossTierStage
from stream_app.service.stages.table_stage import TableStage
from stream_app.service.stages.validate import ValidateStage
from stream_app.service.stages.windows import WindowsStage
from stream_app.service.web import Health, install_pages

log = logging.getLogger(__name__)
T = TypeVar("T", bound=TableStage[Any])

RAW: dict[str, Any] = {
    "key_type": bytes,
    "value_type": bytes,
    "key_serializer": "raw",
    "value_serializer": "raw",
}
TABLE: dict[str, Any] = {
    # bytes keys and values: Faust's raw codec; the core serializes its own state.
    # use_partitioner: a changelog record goes to the partition of its key (Kafka's partitioner,
    # as our sends), not of the batch's current event.
    "key_type": bytes,
    "value_type": bytes,
    "default": None,
    "use_partitioner": True,
}


class WebFirstBoot(BootStrategy):
    """Faust's start order with the web server before the producer: `/healthz` answers while the
    producer connects (a broker that went away again after `stream-app worker` reached it),
    and the port is free between the waiting pages (`web.WaitingPages`) and Faust's pages for
    milliseconds, not for the producer's connection. Stop order is the reverse, as before."""

    def server(self) -> Iterable[ServiceT]:
        """The services of a worker, in start order."""
        return self._chain(
            self.sensors(),
            self.web_server(),
            self.kafka_producer(),
            self.kafka_consumer(),
            self.agents(),
            self.kafka_conductor(),
            self.tables(),
        )


def faust_app(settings: Settings) -> faust.App:
    """The Faust app with evalstream's settings and none from Faust's own environment."""
    n = settings.partitions
    app = faust.App(
        settings.app_id,
        # Faust reads BROKER_URL, STORE_URL, WEB_PORT… from os.environ and lets them override
        # code; an empty env makes EVALSTREAM_* the only configuration.
        env={},
        broker=[f"kafka://{s}" for s in settings.bootstrap_servers],
        broker_credentials=faust_credentials(settings),
        store=settings.store,
        datadir=str(settings.data_dir),
        autodiscover=False,
        topic_partitions=n,
        topic_replication_factor=settings.replication_factor,
        table_standby_replicas=0,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.heartbeat_interval_s,
        processing_guarantee="at_least_once",
        producer_acks=-1,
        # Throughput: Faust's defaults (no linger, 16 KB batches) send a few dozen records per
        # request; a 5 ms linger and batches up to the broker's limit fill requests at a bounded
        # latency cost.
        producer_linger=settings.producer_linger_s,
        # A record batch is what the broker's message limit applies to, and aiokafka does not
        # split one the broker refuses: a batch never exceeds what the broker accepts.
        producer_max_batch_size=settings.broker_max_message_bytes - MESSAGE_OVERHEAD_BYTES,
        producer_max_request_size=PRODUCER_MAX_REQUEST_BYTES,
        web_enabled=True,
        web_bind=settings.web_bind,
        web_host=settings.web_bind,
        web_port=settings.web_port,
        web_transport="tcp://",
        canonical_url=settings.canonical_url,
        Monitor=QuietMonitor,
    )
    app.boot_strategy = WebFirstBoot(app)
    return app


def create_app(settings: Settings, exporter: Exporter | None = None) -> faust.App:
    """Build the worker's Faust app for `settings`: compose the stages with Faust's parts."""
    if settings.broker_kind == "tansu":  # its ListOffsets can answer below the log's end
        install_fetch_highwaters(lambda: client_kwargs(settings))
    if settings.fetch_max_wait_s is not None:
        install_fetch_wait(int(settings.fetch_max_wait_s * 1000))
    install_consumer_positions()
    install_eager_delivery()
    if exporter is None:
        metrics = Exporter(__version__, settings.exported_statistics)
        metrics.watch_gc()
    else:
        metrics = exporter
    topics, n = settings.topics, settings.partitions
    app = faust_app(settings)

    async def send(
        topic: str, key: bytes | None, value: bytes | None, partition: int | None
    ) -> Awaitable[Any]:
        """Hand a record to the producer; the returned future resolves on the broker's ack.
        Faust's `Topic.send` adds ~100 µs of bookkeeping per record (measured: 8.5k records/s
        against 96k/s through the producer directly); every output goes this way instead. Faust
        still flushes the producer before it commits an offset, so at-least-once is unchanged."""
        result: Awaitable[Any] = await app.producer.send(
            topic, key, value, partition=partition, timestamp=None, headers=None
        )
        return result

    windows_table = app.Table(WindowsStage.table_name, partitions=n, **TABLE)
    experiments_table = app.Table(CrossTierStage.table_name, partitions=n, **TABLE)
    validate = ValidateStage(settings, Outputs(send, settings, metrics), metrics)

    def stateful(stage: type[T], table: Any) -> T:
        """A stage over `table`, whose changelog writes are confirmed with its other sends."""
        outputs = Outputs(send, settings, metrics)
        changelog = ChangelogTable(table, outputs, lambda key: stage.key_partition(key, n))
        return stage(changelog, changelog.changelog, settings, outputs, metrics)

    windows = stateful(WindowsStage, windows_table)
    input_topics = {topics.input, topics.runs_by_tier}
    windows.lagging = lambda: metrics.consumer_lag.behind(input_topics, settings.batch_max_events)
    cross_tier = stateful(CrossTierStage, experiments_table)
    # Output topics are written through the producer directly (see `send`) and created by the
    # worker's start-up (`ensure_topics`), so they need no Faust topic objects.
    sources: dict[str, Stage] = {
        topics.input: validate,
        topics.runs_by_tier: windows,
        topics.aggregates: cross_tier,
    }
    batch: dict[str, Any] = {"max_": settings.batch_max_events, "within": settings.batch_within_s}
    for topic, stage in sources.items():
        # The windows hop takes bundles (about a hundred runs each), fewer per batch.
        take = batch if stage is not windows else {**batch, "max_": windows_batch_max(settings)}
        agent_of(app, app.topic(topic, partitions=n, **RAW), stage, take, metrics)
    metrics.declare(
        stages=[s.name for s in sources.values()],
        tables=[windows.table_name, cross_tier.table_name],
    )

    health = Health([windows.table_name, cross_tier.table_name])
    recoverable = (
        (windows_table, windows, topics.runs_by_tier),
        (experiments_table, cross_tier, topics.aggregates),
    )
    for table, stage, topic in recoverable:
        table.on_recover(recovery_of(app, stage, topic, health))

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def forget_revoked(app_: Any, revoked: set[Any], **_: Any) -> None:
        """Drop caches and the gauge series of every key this worker no longer owns."""
        health.recovered.clear()
        validate.drop_cache()
        windows.on_revoked({tp.partition for tp in revoked if tp.topic == topics.runs_by_tier})
        cross_tier.on_revoked({tp.partition for tp in revoked if tp.topic == topics.aggregates})

    install_timers(app, settings, metrics, windows=windows, health=health, sources=set(sources))
    install_pages(app, health, metrics)
    answers = QueryAnswers(metrics.aggregates)

    def ready() -> bool:
        return health.ready(app.rebalancing)

    QueryApi(app, answers, ready, CrossTierStage.table_name).install()
    return app


def install_timers(
    app: faust.App,
    settings: Settings,
    metrics: Exporter,
    *,
    windows: WindowsStage,
    health: Health,
    sources: set[str],
) -> None:
    """The worker's periodic work: the consumer-lag gauge, and retirement."""

    @app.timer(interval=5.0)  # type: ignore[untyped-decorator]
    async def export_consumer_lag() -> None:
        """Messages behind the fetch high watermark, per assigned source partition."""
        metrics.consumer_lag.replace(consumer_lag(app.consumer, sources))

    @app.timer(interval=settings.retire_check_s)  # type: ignore[untyped-decorator]
    async def retire_idle_experiments() -> None:
        """Retire the owned experiments idle for longer than `experiment_idle_ttl_s` (once the
        windows are recovered: before, this worker does not know what it owns)."""
        if windows.table_name not in health.recovered:
            return
        try:
            retired = await windows.retire_idle(to_epoch_us(datetime.now(UTC)))
        except Exception as exc:
            stop_fatally("retirement", exc)
        if retired:
            log.info("retired %d idle experiments, e.g. %s", len(retired), retired[0])


def windows_batch_max(settings: Settings) -> int:
    """Bundles per windows batch: a tenth of `batch_max_events`. Under a backlog a batch then holds
    up to about ten times `batch_max_events` runs, so that a key's runs meet in one aggregate (the
    stage's main cost), and not the thousand times more that as many bundles could hold."""
    return max(1, settings.batch_max_events // 10)


def agent_of(
    app: faust.App, topic: Any, stage: Stage, batch: dict[str, Any], metrics: Exporter
) -> None:
    """One Faust agent that runs `stage` over `topic` in batches."""

    async def agent(stream: StreamT[bytes]) -> None:
        await run_batches(stream, stage, batch, metrics)

    app.agent(topic, name=stage.name)(agent)


def recovery_of(app: faust.App, stage: TableStage[Any], topic: str, health: Health) -> Any:
    """The table-recovered hook of a stage: re-publish what it owns, then count it recovered.
    A send that fails there is no key's fault: the worker stops (a stored state that cannot be
    loaded is the stage's to quarantine)."""

    async def recovered() -> None:
        try:
            count = await stage.on_recover(owned_partitions(app, topic))
            await stage.outputs.confirm()
        except Exception as exc:
            stop_fatally("recovery", exc)
        health.recovered.add(stage.table_name)
        log.info("%s recovered: %d keys owned, outputs re-published", stage.table_name, count)
        if gc.get_freeze_count() == 0 and health.ready(rebalancing=False):
            # Faust's, aiokafka's and the modules' objects live as long as the process: out of
            # the collector's way, a full collection walks only what the worker made since.
            gc.freeze()

    return recovered


def source_topics(settings: Settings) -> list[str]:
    """The topics the worker reads: its three sources and its tables' changelogs."""
    t = settings.topics
    tables = (WindowsStage.table_name, CrossTierStage.table_name)
    return [
        t.input,
        t.runs_by_tier,
        t.aggregates,
        *(f"{settings.app_id}-{n}-changelog" for n in tables),
    ]


def all_topics(settings: Settings) -> list[str]:
    """Every topic the worker reads or writes (created at start-up)."""
    t = settings.topics
    return [t.input, t.dead_letter, t.runs_by_tier, t.aggregates, t.grade_changes, t.cross_tier]
