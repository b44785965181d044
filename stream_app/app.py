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

Delivery is at-least-once: Faust flushes the producer before it commits a source offset, so a
crash redelivers; the window drops the redelivered runs. Two extra rules make the outputs converge
to `replay` through any crash: a grade change is acknowledged by the broker *before* the state
that records it is written, and after every recovery the worker re-publishes the current aggregate
and cross-tier report of every key it owns (an output lost between the changelog write and its own
send is thereby restored; consumers keep the latest message per key).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import faust
from faust.types import EventT, StreamT

from schemas.aggregates import TierAggregate
from schemas.dead_letter import MessageOrigin
from schemas.run_metrics import RunMetrics
from stream_app import __version__
from stream_app.config import Settings
from stream_app.exporter import CONTENT_TYPE, Exporter
from stream_app.ingest import Rejection, evaluate_run, make_dead_letter
from stream_app.kafka_client import client_kwargs, faust_credentials
from stream_app.kafka_compat import install_fetch_highwaters
from stream_app.metrics.cross_tier import cross_tier_report
from stream_app.partitioning import partition_for
from stream_app.tier_state import TierState, split_tier_key, tier_key
from stream_app.window import AddOutcome, WindowEntry

log = logging.getLogger(__name__)

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
    tables: tuple[str, ...] = ("tier-windows", "experiment-tiers")

    def ready(self, app: faust.App) -> bool:
        return not app.rebalancing and all(t in self.recovered for t in self.tables)


def _key_text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def create_app(  # noqa: PLR0915 - one closure per agent/callback reads best as one factory
    settings: Settings, exporter: Exporter | None = None
) -> faust.App:
    """Build the worker's Faust app for `settings`."""
    install_fetch_highwaters(lambda: client_kwargs(settings))
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
        web_enabled=True,
        web_bind=settings.web_bind,
        web_host=settings.web_bind,
        web_port=settings.web_port,
        web_transport="tcp://",
    )
    app.evalstream_metrics = metrics  # type: ignore[attr-defined]
    health = Health()

    input_topic = app.topic(topics.input, partitions=n, **RAW)
    dead_letters = app.topic(topics.dead_letter, partitions=n, **RAW)
    runs_by_tier = app.topic(topics.runs_by_tier, partitions=n, **RAW)
    aggregates = app.topic(topics.aggregates, partitions=n, **RAW)
    grade_changes = app.topic(topics.grade_changes, partitions=n, **RAW)
    cross_tier = app.topic(topics.cross_tier, partitions=n, **RAW)

    # bytes keys and values: Faust's raw codec; the core serializes its own state.
    table_types: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "default": None}
    windows_table = app.Table("tier-windows", partitions=n, **table_types)
    experiments_table = app.Table("experiment-tiers", partitions=n, **table_types)

    async def publish_aggregate(agg: TierAggregate) -> None:
        key = tier_key(agg.experiment_id, agg.tier)
        await aggregates.send(
            key=key.encode(),
            value=agg.model_dump_json().encode(),
            # All tiers of an experiment share a partition, so one cross-tier agent sees them all.
            partition=partition_for(agg.experiment_id, n),
        )
        metrics.set_tier(agg)

    def load_state(key: str, raw: bytes | None) -> TierState:
        experiment_id, tier = split_tier_key(key)
        if raw is None:
            return TierState.empty(experiment_id, tier, settings.window_size)
        return TierState.from_json(experiment_id, tier, settings.window_size, raw)

    @app.agent(input_topic, name="validate")
    async def validate(stream: StreamT[bytes]) -> None:
        event: EventT[bytes]
        async for event in stream.events():
            started = time.perf_counter()
            metrics.received.inc()
            raw = event.value if event.value is not None else b""
            result = evaluate_run(raw, settings)
            if isinstance(result, Rejection):
                msg = event.message
                letter = make_dead_letter(
                    raw,
                    result,
                    MessageOrigin(
                        topic=msg.topic,
                        partition=msg.partition,
                        offset=msg.offset,
                        key=_key_text(event.key),
                    ),
                )
                await dead_letters.send(key=event.key, value=letter.model_dump_json().encode())
                metrics.rejected.labels(reason=result.reason).inc()
            else:
                key = tier_key(result.experiment_id, result.tier)
                await runs_by_tier.send(
                    key=key.encode(),
                    value=result.model_dump_json().encode(),
                    partition=partition_for(key, n),
                )
            metrics.processing.labels(stage="validate").observe(time.perf_counter() - started)

    async def apply_run(run: RunMetrics) -> None:
        key = tier_key(run.experiment_id, run.tier)
        key_bytes = key.encode()
        state = load_state(key, windows_table.get(key_bytes))
        step = state.apply(WindowEntry.from_metrics(run), settings)
        if step.outcome is not AddOutcome.ADDED:
            metrics.ignored.labels(reason=step.outcome.value).inc()
            return
        if step.grade_change is not None:
            change = step.grade_change
            # Acknowledged before the state records it: a crash in between re-sends the same
            # change (identical bytes) instead of losing it.
            sent = await grade_changes.send(key=key_bytes, value=change.model_dump_json().encode())
            await sent
            metrics.grade_changes.labels(run.experiment_id, run.tier, change.direction).inc()
        windows_table[key_bytes] = state.to_json()
        assert step.aggregate is not None
        await publish_aggregate(step.aggregate)
        metrics.accepted.labels(run.experiment_id, run.tier).inc()
        age = (datetime.now(UTC) - run.completed_at).total_seconds()
        metrics.run_age.observe(max(age, 0.0))

    @app.agent(runs_by_tier, name="windows")
    async def windows(stream: StreamT[bytes]) -> None:
        event: EventT[bytes]
        async for event in stream.events():
            started = time.perf_counter()
            try:
                await apply_run(RunMetrics.model_validate_json(event.value))
            finally:
                metrics.processing.labels(stage="window").observe(time.perf_counter() - started)

    def experiment_aggregates(raw: bytes | None) -> dict[str, TierAggregate]:
        if raw is None:
            return {}
        return {t: TierAggregate.model_validate(a) for t, a in json.loads(raw).items()}

    async def publish_report(experiment_id: str, tiers: dict[str, TierAggregate]) -> None:
        report = cross_tier_report(experiment_id, tiers, settings.baseline_tier)
        await cross_tier.send(key=experiment_id.encode(), value=report.model_dump_json().encode())
        metrics.set_experiment(report)

    @app.agent(aggregates, name="cross-tier")
    async def cross_tier_agent(stream: StreamT[bytes]) -> None:
        event: EventT[bytes]
        async for event in stream.events():
            started = time.perf_counter()
            agg = TierAggregate.model_validate_json(event.value)
            key = agg.experiment_id.encode()
            tiers = experiment_aggregates(experiments_table.get(key))
            tiers[agg.tier] = agg
            experiments_table[key] = json.dumps(
                {t: json.loads(a.model_dump_json()) for t, a in tiers.items()},
                separators=(",", ":"),
            ).encode()
            await publish_report(agg.experiment_id, tiers)
            metrics.processing.labels(stage="cross_tier").observe(time.perf_counter() - started)

    def owned_partitions(topic: str) -> set[int]:
        return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}

    @windows_table.on_recover
    async def republish_windows() -> None:
        owned = owned_partitions(topics.runs_by_tier)
        count = 0
        for key_bytes, raw in list(windows_table.items()):
            key = key_bytes.decode()
            if partition_for(key, n) not in owned or raw is None:
                continue
            await publish_aggregate(load_state(key, raw).aggregate(settings))
            count += 1
        health.recovered.add("tier-windows")
        log.info("tier windows recovered: %d keys owned, aggregates re-published", count)

    @experiments_table.on_recover
    async def republish_experiments() -> None:
        owned = owned_partitions(topics.aggregates)
        for key_bytes, raw in list(experiments_table.items()):
            experiment_id = key_bytes.decode()
            if partition_for(experiment_id, n) in owned and raw is not None:
                await publish_report(experiment_id, experiment_aggregates(raw))
        health.recovered.add("experiment-tiers")

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def forget_revoked(app_: Any, revoked: set[Any], **_: Any) -> None:
        """Drop the gauge series of every key whose partition this worker no longer owns."""
        health.recovered.clear()
        lost_tiers = {tp.partition for tp in revoked if tp.topic == topics.runs_by_tier}
        lost_experiments = {tp.partition for tp in revoked if tp.topic == topics.aggregates}
        for key_bytes in list(windows_table.keys()):
            key = key_bytes.decode()
            if partition_for(key, n) in lost_tiers:
                metrics.remove_tier(*split_tier_key(key))
        for key_bytes, raw in list(experiments_table.items()):
            experiment_id = key_bytes.decode()
            if partition_for(experiment_id, n) in lost_experiments and raw is not None:
                metrics.remove_experiment(experiment_id, experiment_aggregates(raw))

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
