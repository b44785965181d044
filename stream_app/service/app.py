"""The Faust application: a thin shell around the pure core.

It only composes (`Worker`): topics, tables, one agent per stage (`stages/`, which know nothing
of Faust, run by `batches.run_batches`), recovery and revoke hooks, the consumer-lag timer and
the web pages. The topology: docs/architecture.md, 'Topology'; at-least-once delivery and the
two rules that make the outputs converge to `replay` (kept in `stages/windows.py`):
docs/delivery.md, 'At-least-once, and equal to `replay`'."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

import faust
from faust.types import TP, StreamT

from stream_app import __version__
from stream_app.core.window import to_epoch_us
from stream_app.service.adaptive_stream import Waiting
from stream_app.service.batches import Batching, Stage, run_batches, stop_fatally
from stream_app.service.changelog_table import ChangelogTable, local_store
from stream_app.service.exporter import Exporter
from stream_app.service.faust_app import EvalstreamApp, faust_app
from stream_app.service.faust_transport import Consumer
from stream_app.service.heap import TRIM_INTERVAL_S, trim_heap
from stream_app.service.latency_path import LatencyPath
from stream_app.service.outputs import Outputs
from stream_app.service.query_api import QueryAnswers, QueryApi
from stream_app.service.settings import Settings
from stream_app.service.stages.cross_tier import CrossTierStage
from stream_app.service.stages.table_stage import Revoked, TableStage
from stream_app.service.stages.windows import WindowsStage
from stream_app.service.table_store import PartitionedStore
from stream_app.service.topology import StatefulStage, build_stages
from stream_app.service.web import Health, install_pages

log = logging.getLogger(__name__)

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


class Worker:
    """The worker's Faust app and the stages it runs, composed once: its outputs' send, its
    tables, one agent per hop, and what it does when partitions are revoked and when a table
    is recovered, each a named method (as Quix Streams' `Application` has `_on_assign`,
    `_on_revoke`). `app` is what Faust runs."""

    def __init__(self, settings: Settings, exporter: Exporter | None = None) -> None:
        if exporter is None:
            exporter = Exporter(__version__, settings.exported_statistics)
            exporter.watch_gc()
        self.settings, self.exporter = settings, exporter
        self.app = faust_app(settings)
        self.tables: dict[str, Any] = {}
        """Each stateful stage's Faust table, by table name."""
        self.stages = build_stages(settings, self.send, exporter, self.table_of)
        for stateful in self.stages.stateful:
            table = self.tables[stateful.table_name]
            exporter.table_keys.watch(stateful.table_name, keys_in(table), stateful.cache.__len__)
        input_topics = {settings.topics.input, settings.topics.runs_by_tier}
        self.stages.windows.lagging = lambda: exporter.consumer_lag.behind(
            input_topics, settings.batch_max_events
        )
        self.latency_path = LatencyPath(waited=exporter.suite_waits.inc)
        """The hops a run's latency waits on; the suite hop's reports wait for their gaps."""
        self.stages.suites.turns = self.latency_path.turns
        self.sources = self.wire_agents()
        """Each hop's stage, by the topic it reads."""
        exporter.declare(
            stages=[s.name for s in self.sources.values()],
            tables=[s.table_name for s in self.stages.stateful],
        )
        self.health = Health([s.table_name for s in self.stages.stateful])
        for topic, stage in self.table_stages():
            self.tables[stage.table_name].on_recover(partial(self.on_recovered, stage, topic))
        self.restorations: set[asyncio.Future[None]] = set()
        """Gauge restorations under way (`restore_gauges`), kept from the garbage collector."""
        self.app.on_partitions_revoked.connect(self.on_revoked)  # type: ignore[arg-type]
        install_timers(
            self.app,
            settings,
            exporter,
            windows=self.stages.windows,
            health=self.health,
            sources=set(self.sources),
        )
        install_pages(self.app, self.health, exporter)
        answers = QueryAnswers(
            exporter.aggregates,
            exporter.suites,
            self.stages.windows.aggregate_of,
            self.stages.cross_tier.report_of,
        )
        QueryApi(self.app, answers, self.ready, CrossTierStage.table_name).install()

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None
    ) -> Awaitable[Any]:
        """Hand a record to the producer; the returned future resolves on the broker's ack.
        Faust's `Topic.send` adds bookkeeping per record that costs more than the send itself
        (docs/benchmark-history.md); every output goes this way instead. Faust still flushes
        the producer before it commits an offset, so at-least-once is unchanged."""
        result: Awaitable[Any] = await self.app.producer.send(
            topic, key, value, partition=partition, timestamp=None, headers=None
        )
        return result

    def table_of(self, stage: StatefulStage, outputs: Outputs) -> ChangelogTable:
        """A stage's Faust table, written once the stage's outputs are acknowledged."""
        n = self.settings.partitions
        table = self.app.Table(stage.table_name, partitions=n, **TABLE)
        self.tables[stage.table_name] = table

        def partition_of(key: bytes) -> int:
            return stage.key_partition(key, n)

        store = table.data
        if isinstance(store, PartitionedStore):
            store.key_partition = partition_of
        changelog = table.changelog_topic.get_topic_name()
        return ChangelogTable(local_store(store), self.send, changelog, partition_of)

    def wire_agents(self) -> dict[str, Stage]:
        """One agent per hop, its batches sized by what waits for it. Output topics are written
        through the producer directly (`send`) and created at start-up
        (`topology.create_topics`), so they need no Faust topic objects."""
        settings, n = self.settings, self.settings.partitions
        sources: dict[str, Stage] = {}
        upstream: set[str] = set()
        for hop, source, hop_stage in self.stages.wired(settings):
            waiting = lag_of(self.app, source, set(upstream), settings.batch_max_events)
            upstream.add(source)
            take = Batching(
                hop.batch_max(settings),
                settings.batch_within_s,
                waiting,
                hop.every(settings),
                path=self.latency_path if hop.on_latency_path else None,
            )
            topic = self.app.topic(source, partitions=n, **RAW)
            agent_of(self.app, topic, hop_stage, take, self.exporter)
            sources[source] = hop_stage
        return sources

    def table_stages(self) -> list[tuple[str, TableStage[Any]]]:
        """The stages that keep a table, each with the topic whose partitions it owns (its
        hop's)."""
        return self.stages.owners(self.settings)

    async def on_revoked(self, app: Any, revoked: set[Any], **_: Any) -> None:
        """Partitions were revoked: stop what is under way and drop the caches; the gauges of
        the keys this worker no longer owns go once its recovery says which (`on_recovered`)."""
        self.health.recovered.clear()
        self.stages.validate.drop_cache()
        for topic, stage in self.table_stages():
            await stage.revoke({tp.partition for tp in revoked if tp.topic == topic})

    async def on_recovered(self, stage: TableStage[Any], topic: str) -> None:
        """A stage's table is recovered: it counts as recovered at once (nothing is
        re-published: every output was acknowledged before its state was written), and the
        gauges of the partitions it newly owns are restored from the table in the background
        (`restore_gauges`). An error there is no key's fault: the worker stops."""
        generation = stage.generation  # that of the assignment read on the next line
        actives = self.app.assignor.assigned_actives()
        owned = partitions_of(actives, topic)
        unread = owned - partitions_of(actives, stage.changelog)  # states that were not read
        if unread:
            stop_fatally("recovery", UnassignedChangelog(stage.changelog, unread))
        moved = partitions_of(self.app.moved_away, stage.changelog)
        self.app.moved_away -= {tp for tp in self.app.moved_away if tp.topic == stage.changelog}
        try:
            newly = await stage.on_recover(owned, generation, moved)
        except Revoked:  # not recovered: the recovery after the rebalance will be
            log.info("%s: recovery cut short by a revocation", stage.table_name)
            return
        except Exception as exc:
            stop_fatally("recovery", exc)
        self.health.recovered.add(stage.table_name)
        log.info("%s recovered: %d partitions owned", stage.table_name, len(owned))
        if newly:
            task = asyncio.ensure_future(self.restore_gauges(stage, newly, generation))
            self.restorations.add(task)
            task.add_done_callback(self.restorations.discard)
        if gc.get_freeze_count() == 0 and self.health.ready(rebalancing=False):
            # Faust's, aiokafka's and the modules' objects live as long as the process: out of
            # the collector's way, a full collection walks only what the worker made since.
            gc.freeze()

    async def restore_gauges(
        self, stage: TableStage[Any], partitions: set[int], generation: int
    ) -> None:
        """Restore a stage's gauges of `partitions` once the rebalance has settled; a revocation
        cuts it short (the recovery that follows restores what is then owned). Not before: a
        restoration is seconds of CPU with 100,000 tiers, and Faust's recovery still has to seek
        the stream partitions, through the consumer thread, before the worker is ready."""
        await self.app.settled.wait()
        started = time.monotonic()
        try:
            count = await stage.restore_gauges(partitions, generation)
        except Revoked:
            log.info("%s: gauge restoration cut short by a revocation", stage.table_name)
            return
        except Exception as exc:
            stop_fatally("recovery", exc)
        log.info(
            "%s: gauges of %d keys restored in %.1f s",
            stage.table_name,
            count,
            time.monotonic() - started,
        )

    def ready(self) -> bool:
        """Every table recovered, and no rebalance under way."""
        return self.health.ready(self.app.rebalancing)


def create_app(settings: Settings, exporter: Exporter | None = None) -> EvalstreamApp:
    """Build the worker's Faust app for `settings`: compose the stages with Faust's parts."""
    return Worker(settings, exporter).app


def keys_in(table: Any) -> Callable[[], int]:
    """The number of keys a Faust table's store holds, when asked: counted in memory, RocksDB's
    estimate on disk (counting would read every key at every scrape)."""
    store = table.data
    if isinstance(store, PartitionedStore):
        return store.estimated_keys
    return lambda: len(store)


def install_timers(
    app: faust.App,
    settings: Settings,
    exporter: Exporter,
    *,
    windows: WindowsStage,
    health: Health,
    sources: set[str],
) -> None:
    """The worker's periodic work: the consumer-lag gauge, retirement, and the heap's trim."""

    @app.timer(interval=5.0)  # type: ignore[untyped-decorator]
    async def export_consumer_lag() -> None:
        """Messages behind the fetch high watermark, per assigned source partition."""
        exporter.consumer_lag.replace(cast(Consumer, app.consumer).lag(sources))

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

    @app.timer(interval=TRIM_INTERVAL_S)  # type: ignore[untyped-decorator]
    async def give_back_freed_memory() -> None:
        """Return the pages freed since to the system, on a thread (the event loop goes on)."""
        await asyncio.get_running_loop().run_in_executor(None, trim_heap)


def lag_of(app: faust.App, source: str, upstream: set[str], backlog: int) -> Waiting:
    """What a hop's batches wait for: the messages of its `source` this worker has yet to hand
    to it, and `backlog` more while the hops before it (reading `upstream`) are more than
    `backlog` messages behind: their output is then on its way in bulk."""

    def waiting() -> int:
        consumer = cast(Consumer, app.consumer)
        try:
            own = sum(consumer.lag({source}).values())  # ints
            if upstream and sum(consumer.lag(upstream).values()) > backlog:  # ints
                return own + backlog
        except Exception:  # an estimate read across the consumer thread, as it reassigns:
            return 0  # the batch goes with what it has, rather than the worker stopping
        return own

    return waiting


def agent_of(
    app: faust.App, topic: Any, stage: Stage, batching: Batching, exporter: Exporter
) -> None:
    """One Faust agent that runs `stage` over `topic` in batches."""

    async def agent(stream: StreamT[bytes]) -> None:
        await run_batches(stream, stage, batching, exporter)

    app.agent(topic, name=stage.name)(agent)


class UnassignedChangelog(Exception):
    """Partitions of a stage's source were assigned without those of its table's changelog, so
    their states were not read back: Faust's assignor leaves out a topic missing from the
    leader's metadata (`topology.create_topics`). The worker stops rather than go on from
    empty states; it creates missing changelogs before it starts again."""

    def __init__(self, changelog: str, partitions: set[int]) -> None:
        super().__init__(
            f"partitions {sorted(partitions)} of {changelog} were not assigned with their "
            "source's: their states were not recovered"
        )


def partitions_of(assigned: Iterable[TP], topic: str) -> set[int]:
    """The partitions of `topic` among `assigned` (the worker's active ones: not standby)."""
    return {tp.partition for tp in assigned if tp.topic == topic}
