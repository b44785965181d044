"""evalstream's Faust app: Faust's `App` with evalstream's settings, its start order
(`App.BootStrategy`) and its transport (`faust_transport`), scoped to this app alone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Final

import faust
from faust.app import BootStrategy
from faust.tables import TableManager
from faust.types import TP, ServiceT
from typing_extensions import override

from stream_app.service.adaptive_stream import AdaptiveStream
from stream_app.service.faust_transport import transport_for
from stream_app.service.kafka_client import faust_credentials
from stream_app.service.quiet_monitor import QuietMonitor
from stream_app.service.settings import (
    MESSAGE_OVERHEAD_BYTES,
    PRODUCER_MAX_REQUEST_BYTES,
    Settings,
)
from stream_app.service.table_store import PartitionedStore, check_stores

STORE_URLS: Final = {"rocksdb": "evalstream-rocksdb://", "memory": "memory://"}
"""Faust's store of each `store` setting: `evalstream-rocksdb` is `table_store.PartitionedStore`,
registered as an entry point of Faust's `faust.stores` group (pyproject.toml)."""


class WebFirstBoot(BootStrategy):
    """Faust's start order with the web server before the producer: `/healthz` answers while the
    producer connects (a broker that went away again after `stream-app worker` reached it),
    and the port is free between the waiting pages (`web.WaitingPages`) and Faust's pages for
    milliseconds, not for the producer's connection. Stop order is the reverse, as before."""

    @override
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


class PromptTableManager(TableManager):
    """Faust's table manager without the fixed second it sleeps before registering the tables'
    changelogs (for tables declared after the app starts): evalstream declares every table in
    `app.create_app`, before the start, and a restarted worker joins its group a second
    sooner."""

    @override
    async def on_start(self) -> None:
        """Register the changelogs and start the recovery, at once."""
        if not self.should_stop:
            await self._update_channels()
            await self.recovery.start()

    @override
    async def on_rebalance(
        self,
        assigned: set[TP],
        revoked: set[TP],
        newly_assigned: set[TP],
        generation_id: int = 0,
    ) -> None:
        """Before Faust's recovery reads the local stores' checkpoints, discard each newly
        assigned partition's database that its changelog does not vouch for, and load the
        empty active ones in bulk (`table_store.check_stores`); and note the partitions that
        really left this worker (`revoked` here is the change of assignment, not all that
        Kafka's eager protocol revokes), for the recovery that follows to drop their gauges
        (`moved_away`)."""
        stores = [t.data for t in self.values() if isinstance(t.data, PartitionedStore)]
        app: EvalstreamApp = self.app  # type: ignore[assignment]
        app.moved_away |= {tp for tp in revoked if tp.topic in self.changelog_topics}
        actives = app.assignor.assigned_actives()
        await check_stores(app.settings, stores, newly_assigned, actives)
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)


class EvalstreamApp(faust.App):
    """Faust's app, carrying evalstream's settings (its consumer thread reads them) and
    starting its web server before its producer."""

    BootStrategy = WebFirstBoot

    def __init__(self, settings: Settings, **options: Any) -> None:
        self.settings = settings
        self.moved_away: set[TP] = set()
        """Partitions that left this worker since the tables' recoveries took them in
        (`Worker.on_recovered`): a recovery cut short by another rebalance does not see
        them, and one of them may come back."""
        self.settled = asyncio.Event()
        """Set once a rebalance has ended (Faust's recovery sought the stream partitions and
        resumed them: the worker is ready), on the event loop; cleared when the next one starts,
        on the consumer thread (a flag's write: the waiters are on the loop). A rebalance that
        starts in the instant between a recovery's seek and its end finds it set, as Faust's
        `rebalancing` flag then reads False: its restorations may start before its seek, as
        they all did before."""
        super().__init__(settings.app_id, **options)

    @override
    def on_rebalance_start(self) -> None:
        """Faust's, called on the consumer thread; the rebalance is no longer settled."""
        self.settled.clear()
        super().on_rebalance_start()

    @override
    def on_rebalance_end(self) -> None:
        """Faust's, called on the event loop by the recovery; the rebalance has settled."""
        super().on_rebalance_end()
        self.settled.set()


def faust_app(settings: Settings) -> EvalstreamApp:
    """The Faust app with evalstream's settings and none from Faust's own environment."""
    n = settings.partitions
    app = EvalstreamApp(
        settings,
        # Faust reads BROKER_URL, STORE_URL, WEB_PORT… from os.environ and lets them override
        # code; an empty env makes EVALSTREAM_* the only configuration.
        env={},
        broker=[f"kafka://{s}" for s in settings.bootstrap_servers],
        broker_credentials=faust_credentials(settings),
        store=STORE_URLS[settings.store],
        datadir=str(settings.data_dir),
        autodiscover=False,
        topic_partitions=n,
        topic_replication_factor=settings.replication_factor,
        table_standby_replicas=settings.standby_replicas,
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
        Stream=AdaptiveStream,
        TableManager=PromptTableManager,
        consumer_group_instance_id=settings.group_instance_id,
    )
    app.transport = transport_for(app)
    return app
