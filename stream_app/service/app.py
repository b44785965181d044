"""The Faust application: a thin shell around the pure core.

Topology (topic names from `Settings.topics`):

    run-completed (raw bytes)
      └─ agent `validate`: core validation and per-run metrics
           ├─ rejected → run-completed.dlq (DeadLetter with the original bytes)
           └─ accepted → evalstream-runs-by-tier (RunMetrics, key experiment/tier)
                └─ agent `windows`: table `tier-windows` (TierState per key)
                     ├─ tier-aggregates (TierAggregate, key experiment/tier,
                     │                   partitioned by experiment)
                     │    └─ agent `cross-tier`: table `experiment-tiers`
                     │         └─ cross-tier-reports (CrossTierReport, key experiment)
                     └─ grade-changes (GradeChange, key experiment/tier)

Each agent takes events in batches (`batch_max_events`, at most `batch_within_s` to fill one) and
writes its table and sends its outputs once per key per batch: the last aggregate of a key in a
batch supersedes the others. Delivery is at-least-once: a batch is acknowledged after it was
processed and Faust flushes the producer before it commits an offset, so a crash redelivers; the
window drops the redelivered runs. Two extra rules make the outputs converge
to `replay` through any crash: a grade change is acknowledged by the broker *before* the state
that records it is written, and after every recovery the worker re-publishes the current aggregate
and cross-tier report of every key it owns (an output lost between the changelog write and its own
send is thereby restored; consumers keep the latest message per key).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import faust
from faust.types import EventT, StreamT

from schemas.aggregates import TierAggregate
from schemas.cross_tier import CrossTierReport
from schemas.dead_letter import MessageOrigin, cap_key
from stream_app import __version__
from stream_app.core.ingest import (
    Rejection,
    error_text,
    evaluate_run,
    make_dead_letter,
    processing_error,
    state_error,
)
from stream_app.core.keyed_batch import KeyedFold
from stream_app.core.tier_state import TierState, fold_runs, split_tier_key, tier_key
from stream_app.core.window import AddOutcome, WindowEntry, to_epoch_us
from stream_app.metrics.cross_tier import TierMedians, cross_tier_report_from_medians
from stream_app.service.exporter import CONTENT_TYPE, Exporter
from stream_app.service.kafka_client import client_kwargs, faust_credentials
from stream_app.service.kafka_compat import (
    install_fetch_highwaters,
    install_fetch_wait,
    withhold_acks,
)
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import PRODUCER_MAX_REQUEST_BYTES, Settings

log = logging.getLogger(__name__)

EXIT_FATAL = 70
"""Exit status of a worker stopped by an error that is no single event's fault."""
TIER_WINDOWS = "tier-windows"
EXPERIMENT_TIERS = "experiment-tiers"

RAW: dict[str, Any] = {
    "key_type": bytes,
    "value_type": bytes,
    "key_serializer": "raw",
    "value_serializer": "raw",
}


@dataclass
class Health:
    """/readyz: the worker joined the group and recovered both tables since the last rebalance."""

    recovered: set[str] = field(default_factory=set)
    tables: tuple[str, ...] = (TIER_WINDOWS, EXPERIMENT_TIERS)

    def ready(self, app: faust.App) -> bool:
        return not app.rebalancing and all(t in self.recovered for t in self.tables)


def _key_text(raw: bytes | None) -> str | None:
    """The key as text for a dead letter's origin: None unless UTF-8, cut to the key cap."""
    if raw is None:
        return None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return cast(bytes, cap_key(raw)).decode("utf-8", "ignore")


def stop_fatally(stage: str, exc: BaseException) -> None:
    """Stop the process at once, before any offset of the failed batch can be committed: a
    restart redelivers the batch. For errors that are no event's fault (a send the producer
    gave up on, a defect in the shell); an event's own problem is its dead letter instead."""
    log.critical(
        "evalstream: stopping: the %s stage failed on an error that is no single event's fault "
        "(%s); its batch is not committed and is redelivered after a restart",
        stage,
        error_text(exc),
        exc_info=exc,
    )
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(EXIT_FATAL)


def create_app(  # noqa: PLR0915 - one closure per agent/callback reads best as one factory
    settings: Settings, exporter: Exporter | None = None
) -> faust.App:
    """Build the worker's Faust app for `settings`."""
    install_fetch_highwaters(lambda: client_kwargs(settings))
    install_fetch_wait(int(settings.fetch_max_wait_s * 1000))
    metrics = exporter or Exporter(__version__, settings.pass_at_k.k_values)
    topics = settings.topics
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
        # request; a 5 ms linger and 1 MB batches fill requests at a bounded latency cost.
        producer_linger=settings.producer_linger_s,
        producer_max_batch_size=1_048_576,
        producer_max_request_size=PRODUCER_MAX_REQUEST_BYTES,
        web_enabled=True,
        web_bind=settings.web_bind,
        web_host=settings.web_bind,
        web_port=settings.web_port,
        web_transport="tcp://",
    )
    app.evalstream_metrics = metrics  # type: ignore[attr-defined]
    health = Health()
    for table_name in (TIER_WINDOWS, EXPERIMENT_TIERS):
        metrics.quarantined.labels(table=table_name)

    input_topic = app.topic(topics.input, partitions=n, **RAW)
    runs_by_tier = app.topic(topics.runs_by_tier, partitions=n, **RAW)
    aggregates = app.topic(topics.aggregates, partitions=n, **RAW)
    # Output topics are written through the producer directly (see `send`) and created by the
    # worker's start-up (`ensure_topics`), so they need no Faust topic objects.

    # bytes keys and values: Faust's raw codec; the core serializes its own state.
    # use_partitioner: a changelog record goes to the partition of its key (Kafka's partitioner,
    # as our sends), not of the batch's current event.
    table_types: dict[str, Any] = {
        "key_type": bytes,
        "value_type": bytes,
        "default": None,
        "use_partitioner": True,
    }
    windows_table = app.Table(TIER_WINDOWS, partitions=n, **table_types)
    experiments_table = app.Table(EXPERIMENT_TIERS, partitions=n, **table_types)

    async def send(
        topic: str, key: bytes | None, value: bytes, partition: int | None = None
    ) -> Awaitable[Any]:
        """Hand a record to the producer; the returned future resolves on the broker's ack.
        Faust's `Topic.send` adds ~100 µs of bookkeeping per record (measured: 8.5k records/s
        against 96k/s through the producer directly); every output goes this way instead. Faust
        still flushes the producer before it commits an offset, so at-least-once is unchanged."""
        result: Awaitable[Any] = await app.producer.send(
            topic, key, value, partition=partition, timestamp=None, headers=None
        )
        return result

    async def publish_aggregate(agg: TierAggregate) -> None:
        key = tier_key(agg.experiment_id, agg.tier)
        await send(
            topics.aggregates,
            key.encode(),
            agg.model_dump_json().encode(),
            # All tiers of an experiment share a partition, so one cross-tier agent sees them all.
            partition_for(agg.experiment_id, n),
        )
        metrics.set_tier(agg)

    def load_state(key: str, raw: bytes) -> TierState:
        """A stored tier state, checked to aggregate: a state that cannot is caught here, once,
        and quarantined, instead of failing every later run of its tier."""
        experiment_id, tier = split_tier_key(key)
        state = TierState.from_json(experiment_id, tier, settings.window_size, raw)
        state.aggregate(settings)
        return state

    batch: dict[str, Any] = {"max_": settings.batch_max_events, "within": settings.batch_within_s}

    def observe(stage: str, started: float, events: int) -> None:
        """Per-event processing time: the batch's time spread over its events."""
        per_event = (time.perf_counter() - started) / max(events, 1)
        histogram = metrics.processing.labels(stage=stage)
        for _ in range(events):
            histogram.observe(per_event)

    async def run_batches(
        stream: StreamT[bytes],
        stage: str,
        handle: Callable[[Sequence[EventT[bytes]]], Awaitable[None]],
    ) -> None:
        """An agent's loop: take a batch, handle it, time it. Every event's own problem is handled
        inside `handle` (a dead letter); whatever escapes it is no event's fault and stops the
        worker before the batch is committed. A batch cancelled mid-way (shutdown) is withheld
        from the commit, so it is redelivered rather than half done."""
        events: Sequence[EventT[bytes]]
        async for events in cast(faust.Stream[bytes], stream).take_events(**batch):
            started = time.perf_counter()
            try:
                await handle(events)
            except asyncio.CancelledError:
                withhold_acks(events)
                tier_cache.clear()  # may be ahead of the tables now
                experiment_cache.clear()
                raise
            except Exception as exc:
                withhold_acks(events)
                stop_fatally(stage, exc)
            observe(stage, started, len(events))

    async def dead_letter(
        raw: bytes,
        rejection: Rejection,
        topic: str,
        *,
        partition: int | None = None,
        offset: int | None = None,
        key: bytes | None = None,
    ) -> None:
        """Dead-letter one message (or stored state) with the bytes the stage received."""
        origin = MessageOrigin(topic=topic, partition=partition, offset=offset, key=_key_text(key))
        cap = settings.dead_letter_cap
        try:
            value = make_dead_letter(raw, rejection, origin, payload_cap=cap).model_dump_json()
        except Exception as exc:  # a detail that does not serialize must not cost the letter
            plain = Rejection(rejection.reason, {"unserializable_detail": error_text(exc)})
            value = make_dead_letter(raw, plain, origin, payload_cap=cap).model_dump_json()
        await send(topics.dead_letter, cap_key(key), value.encode())
        metrics.rejected.labels(reason=rejection.reason).inc()
        if rejection.reason in ("processing_error", "state_error"):
            log.warning(
                "dead-lettered %s from %s[%s]@%s: %s",
                rejection.reason,
                topic,
                partition,
                offset,
                rejection.detail,
            )

    async def reject_event(event: EventT[bytes], rejection: Rejection) -> None:
        msg = event.message
        raw = event.value if event.value is not None else b""
        await dead_letter(
            raw, rejection, msg.topic, partition=msg.partition, offset=msg.offset, key=event.key
        )

    async def quarantine(table: Any, table_name: str, key: bytes, error: Exception) -> None:
        """A stored state that cannot be loaded: dead-letter its bytes, count it, reset the key."""
        raw = table.get(key)
        await dead_letter(
            raw if isinstance(raw, bytes) else b"",
            state_error(table_name, error),
            f"{settings.app_id}-{table_name}-changelog",
            key=key,
        )
        metrics.quarantined.labels(table=table_name).inc()
        table.pop(key, None)

    async def validate_batch(events: Sequence[EventT[bytes]]) -> None:
        metrics.received.inc(len(events))
        for event in events:
            raw = event.value if event.value is not None else b""
            result = evaluate_run(raw, settings)  # never raises
            if not isinstance(result, Rejection):
                try:
                    key = tier_key(result.experiment_id, result.tier)
                    value = result.model_dump_json().encode()
                except Exception as exc:
                    result = processing_error("validate", exc)
                else:
                    await send(topics.runs_by_tier, key.encode(), value, partition_for(key, n))
                    continue
            await reject_event(event, result)

    # Decoded state of the keys this worker handles, so a batch does not re-read the table. The
    # table (and its changelog) stays the truth: the caches are dropped on every rebalance.
    tier_cache: dict[bytes, TierState] = {}
    experiment_cache: dict[bytes, dict[str, TierMedians]] = {}

    @app.agent(input_topic, name="validate")
    async def validate(stream: StreamT[bytes]) -> None:
        await run_batches(stream, "validate", validate_batch)

    def cached_tier(key: str) -> TierState | None:
        key_bytes = key.encode()
        state = tier_cache.get(key_bytes)
        if state is not None:
            return state
        raw = windows_table.get(key_bytes)
        return None if raw is None else load_state(key, raw)

    async def apply_batch(events: Sequence[EventT[bytes]]) -> None:
        runs: list[tuple[str, WindowEntry]] = []
        sources: list[EventT[bytes]] = []
        for event in events:
            try:
                doc = json.loads(event.value)
                key = tier_key(doc["experiment_id"], doc["tier"])
                entry = WindowEntry.from_forwarded(doc)
            except Exception as exc:
                await reject_event(event, processing_error("window", exc))
                continue
            runs.append((key, entry))
            sources.append(event)
        try:
            folded = fold_runs(runs, cached_tier, settings)
        except BaseException:
            tier_cache.clear()  # the fold may have changed cached states: reload from the table
            raise
        for failure in folded.failures:
            await reject_event(sources[failure.index], processing_error("window", failure.error))
        for bad in folded.quarantined:
            await quarantine(windows_table, TIER_WINDOWS, bad.key.encode(), bad.error)
        now_us = to_epoch_us(datetime.now(UTC))
        pending: list[Awaitable[Any]] = []
        added: dict[str, int] = {}
        for key, steps in folded.steps.items():
            saved = key in folded.states
            if not saved:
                tier_cache.pop(key.encode(), None)  # its cached state may be ahead of the table
            for _, step in steps:
                if step.outcome is not AddOutcome.ADDED:
                    metrics.ignored.labels(reason=step.outcome.value).inc()
                    continue
                added[key] = added.get(key, 0) + 1
                change = step.grade_change
                if change is not None:
                    pending.append(
                        await send(
                            topics.grade_changes, key.encode(), change.model_dump_json().encode()
                        )
                    )
                    metrics.grade_changes.labels(
                        change.experiment_id, change.tier, change.direction
                    ).inc()
        # The batch's grade changes are acknowledged before the states that record them are
        # written: a crash in between re-sends the same changes (identical bytes), never loses one.
        if pending:
            await asyncio.gather(*pending)
        for key, state in folded.states.items():  # once per key per batch
            key_bytes = key.encode()
            windows_table[key_bytes] = state.to_json()
            tier_cache[key_bytes] = state
            metrics.accepted.labels(state.experiment_id, state.tier).inc(added.get(key, 0))
            await publish_aggregate(folded.results[key])
        for run_key, entry in runs:
            if run_key in folded.states:
                metrics.run_age.observe(max(now_us - entry.completed_at_us, 0) / 1e6)

    @app.agent(runs_by_tier, name="windows")
    async def windows(stream: StreamT[bytes]) -> None:
        await run_batches(stream, "window", apply_batch)

    def load_medians(raw: bytes) -> dict[str, TierMedians]:
        """A stored experiment state, checked to give a report (else it is quarantined)."""
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("experiment state is not a JSON object")
        tiers = {tier: TierMedians(*(float(v) for v in values)) for tier, values in data.items()}
        if tiers:
            cross_tier_report_from_medians("check", tiers, settings.baseline_tier)
        return tiers

    async def publish_report(report: CrossTierReport) -> None:
        key = report.experiment_id.encode()
        await send(topics.cross_tier, key, report.model_dump_json().encode())
        metrics.set_experiment(report)

    def cached_experiment(experiment_id: str) -> dict[str, TierMedians] | None:
        key = experiment_id.encode()
        tiers = experiment_cache.get(key)
        if tiers is not None:
            return tiers
        raw = experiments_table.get(key)
        return None if raw is None else load_medians(raw)

    def set_tier(tiers: dict[str, TierMedians], item: tuple[str, TierMedians]) -> tuple[bool, None]:
        tiers[item[0]] = item[1]
        return True, None

    def report(experiment_id: str, tiers: dict[str, TierMedians]) -> CrossTierReport:
        return cross_tier_report_from_medians(experiment_id, tiers, settings.baseline_tier)

    experiment_fold = KeyedFold(cached_experiment, lambda _: {}, dict, set_tier, report)

    async def report_batch(events: Sequence[EventT[bytes]]) -> None:
        items: list[tuple[str, tuple[str, TierMedians]]] = []
        sources: list[EventT[bytes]] = []
        for event in events:
            try:
                doc = json.loads(event.value)
                medians = TierMedians(*(float(doc[f]["median"]) for f in TierMedians._fields))
                items.append((str(doc["experiment_id"]), (str(doc["tier"]), medians)))
            except Exception as exc:
                await reject_event(event, processing_error("cross_tier", exc))
                continue
            sources.append(event)
        try:
            folded = experiment_fold.run(items)
        except BaseException:
            experiment_cache.clear()
            raise
        for failure in folded.failures:
            await reject_event(
                sources[failure.index], processing_error("cross_tier", failure.error)
            )
        for bad in folded.quarantined:
            await quarantine(experiments_table, EXPERIMENT_TIERS, bad.key.encode(), bad.error)
        for experiment_id in folded.steps:
            if experiment_id not in folded.states:
                experiment_cache.pop(experiment_id.encode(), None)
        for experiment_id, tiers in folded.states.items():  # once per experiment per batch
            key = experiment_id.encode()
            experiments_table[key] = json.dumps(tiers, separators=(",", ":")).encode()
            experiment_cache[key] = tiers
            await publish_report(folded.results[experiment_id])

    @app.agent(aggregates, name="cross-tier")
    async def cross_tier_agent(stream: StreamT[bytes]) -> None:
        await run_batches(stream, "cross_tier", report_batch)

    def owned_partitions(topic: str) -> set[int]:
        return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}

    @windows_table.on_recover
    async def republish_windows() -> None:
        """Re-publish every owned tier's aggregate; a stored state that cannot be loaded or
        aggregated is quarantined, so no key can keep the worker unready."""
        tier_cache.clear()
        owned = owned_partitions(topics.runs_by_tier)
        count = 0
        try:
            for key_bytes, raw in list(windows_table.items()):
                if raw is None:
                    continue
                try:
                    key = key_bytes.decode()
                    if partition_for(key, n) not in owned:
                        continue
                    aggregate = load_state(key, raw).aggregate(settings)
                except Exception as exc:
                    await quarantine(windows_table, TIER_WINDOWS, key_bytes, exc)
                    continue
                await publish_aggregate(aggregate)
                count += 1
        except Exception as exc:
            stop_fatally("recovery", exc)
        health.recovered.add(TIER_WINDOWS)
        log.info("tier windows recovered: %d keys owned, aggregates re-published", count)

    @experiments_table.on_recover
    async def republish_experiments() -> None:
        experiment_cache.clear()
        owned = owned_partitions(topics.aggregates)
        try:
            for key_bytes, raw in list(experiments_table.items()):
                if raw is None:
                    continue
                try:
                    experiment_id = key_bytes.decode()
                    if partition_for(experiment_id, n) not in owned:
                        continue
                    tiers = load_medians(raw)
                    result = report(experiment_id, tiers) if tiers else None
                except Exception as exc:
                    await quarantine(experiments_table, EXPERIMENT_TIERS, key_bytes, exc)
                    continue
                if result is not None:
                    await publish_report(result)
        except Exception as exc:
            stop_fatally("recovery", exc)
        health.recovered.add(EXPERIMENT_TIERS)

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def forget_revoked(app_: Any, revoked: set[Any], **_: Any) -> None:
        """Drop the gauge series of every key whose partition this worker no longer owns."""
        health.recovered.clear()
        tier_cache.clear()
        experiment_cache.clear()
        lost_tiers = {tp.partition for tp in revoked if tp.topic == topics.runs_by_tier}
        lost_experiments = {tp.partition for tp in revoked if tp.topic == topics.aggregates}
        for key_bytes in list(windows_table.keys()):
            key = key_bytes.decode(errors="replace")
            if partition_for(key, n) in lost_tiers:
                metrics.remove_tier(*split_tier_key(key))
        for key_bytes, raw in list(experiments_table.items()):
            experiment_id = key_bytes.decode(errors="replace")
            if partition_for(experiment_id, n) in lost_experiments and raw is not None:
                try:
                    tiers = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(tiers, dict):
                    metrics.remove_experiment(experiment_id, [str(t) for t in tiers])

    source_topics = {topics.input, topics.runs_by_tier, topics.aggregates}

    @app.timer(interval=5.0)  # type: ignore[untyped-decorator]
    async def export_consumer_lag() -> None:
        """Messages behind the fetch high watermark, per assigned source partition."""
        consumer: Any = app.consumer
        assigned = {tp for tp in consumer.assignment() if tp.topic in source_topics}
        metrics.consumer_lag.clear()
        for tp in assigned:
            highwater = consumer.highwater(tp)
            read = consumer._read_offset.get(tp)  # last offset handed to an agent
            if highwater is None:
                continue
            next_offset = read + 1 if read is not None else consumer._committed_offset.get(tp)
            lag = highwater - next_offset if next_offset is not None else highwater
            metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(max(lag, 0))

    @app.page("/metrics")
    async def metrics_page(web: Any, request: Any) -> Any:
        return web.bytes(metrics.render(), content_type=CONTENT_TYPE)

    @app.page("/healthz")
    async def healthz(web: Any, request: Any) -> Any:
        return web.json({"status": "alive", "version": __version__})

    @app.page("/readyz")
    async def readyz(web: Any, request: Any) -> Any:
        ready = health.ready(app)
        return web.json(
            {"ready": ready, "recovered": sorted(health.recovered)}, status=200 if ready else 503
        )

    return app


def all_topics(settings: Settings) -> list[str]:
    t = settings.topics
    return [t.input, t.dead_letter, t.runs_by_tier, t.aggregates, t.grade_changes, t.cross_tier]
