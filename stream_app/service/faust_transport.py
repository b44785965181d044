"""evalstream's Faust transport: Faust's aiokafka driver through its own extension points
(`Transport.Consumer`, `Transport.Producer`, `Consumer._new_consumer_thread`), subclassed, and
given to evalstream's app alone, so that no other app in the process is changed. Honest stream
positions, a recovery's end offsets, the fetch wait and eager delivery: what each is for, on
which broker, and the evidence are in docs/brokers.md, 'Which broker needs which workaround'."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, Protocol, cast

import aiokafka
import faust
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from faust.transport.consumer import ensure_TP
from faust.transport.drivers import aiokafka as driver
from faust.types import TP
from faust.types.transports import TransportT
from mode.services import WaitArgT, WaitResults
from typing_extensions import override

from stream_app.service.faust_producer import Producer
from stream_app.service.high_watermarks import fetch_high_watermarks
from stream_app.service.kafka_client import client_kwargs
from stream_app.service.settings import Settings


class SettingsCarrier(Protocol):
    """What this transport needs of its app: evalstream's settings (`faust_app.EvalstreamApp`
    carries them; naming the protocol, not the app, keeps the two modules out of a cycle)."""

    settings: Settings


class ConsumerThread(driver.AIOKafkaConsumerThread):
    """Faust's aiokafka consumer thread, with evalstream's positions, end offsets and fetch
    wait. Its settings are its app's."""

    @property
    def evalstream(self) -> SettingsCarrier:
        """The app, typed as the one this thread belongs to."""
        return cast(SettingsCarrier, self.app)

    @override
    def _create_worker_consumer(self, transport: driver.Transport) -> aiokafka.AIOKafkaConsumer:
        """Faust's worker consumer, built with the fetch wait of the settings when one is set:
        Faust hard-codes 1.5 s, and aiokafka takes the wait at construction only. The arguments
        are Faust's own (`tests/service/test_faust_transport.py` compares the two consumers)."""
        wait = self.evalstream.settings.fetch_max_wait_s
        if wait is None:
            return super()._create_worker_consumer(transport)
        conf = self.app.conf
        # Faust's own choices, as its `_create_worker_consumer` makes them.
        self._assignor = (
            self.app.assignor
            if conf.table_standby_replicas > 0 or self.app.tables.changelog_topics
            else RoundRobinPartitionAssignor
        )
        if conf.broker_session_timeout > conf.broker_request_timeout:
            return super()._create_worker_consumer(transport)  # Faust says why
        return aiokafka.AIOKafkaConsumer(
            client_id=conf.broker_client_id,
            group_id=conf.id,
            group_instance_id=conf.consumer_group_instance_id,
            bootstrap_servers=driver.server_list(transport.url, transport.default_port),
            partition_assignment_strategy=[self._assignor],
            enable_auto_commit=False,
            auto_offset_reset=conf.consumer_auto_offset_reset,
            max_poll_records=conf.broker_max_poll_records,
            max_poll_interval_ms=int((conf.broker_max_poll_interval or 0) * 1000.0),
            max_partition_fetch_bytes=conf.consumer_max_fetch_size,
            fetch_max_wait_ms=int(wait * 1000),
            request_timeout_ms=int(conf.broker_request_timeout * 1000.0),
            check_crcs=conf.broker_check_crcs,
            session_timeout_ms=int(conf.broker_session_timeout * 1000.0),
            rebalance_timeout_ms=int(conf.broker_rebalance_timeout * 1000.0),
            heartbeat_interval_ms=int(conf.broker_heartbeat_interval * 1000.0),
            isolation_level="read_committed"
            if self.consumer.in_transaction
            else "read_uncommitted",
            metadata_max_age_ms=conf.consumer_metadata_max_age_ms,
            connections_max_idle_ms=conf.consumer_connections_max_idle_ms,
            **driver.credentials_to_aiokafka_auth(conf.broker_credentials, conf.ssl_context),
        )

    @override
    async def _highwaters(self, partitions: list[TP]) -> Mapping[TP, int]:
        """On Tansu, a recovery's end offsets from Fetch responses: its ListOffsets can answer
        below a partition's real end, and the recovery would stop early, losing a window's last
        updates."""
        settings = self.evalstream.settings
        if settings.broker_kind != "tansu" or self.consumer.in_transaction:
            return await super()._highwaters(partitions)
        tps = [aiokafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        found = await fetch_high_watermarks(client_kwargs(settings), tps)
        return {tp: found[aiokafka.TopicPartition(tp.topic, tp.partition)] for tp in partitions}

    @override
    async def _fetch_records(
        self,
        consumer: aiokafka.AIOKafkaConsumer,
        active_partitions: set[TP],
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> Any:
        """Fetch from a snapshot of the active partitions, nothing when it is empty: Faust passes
        its live set, which recovery empties, and aiokafka reads an empty set as every partition
        (whose records Faust would then drop as not active)."""
        snapshot = None if active_partitions is None else frozenset(active_partitions)
        if snapshot is not None and not snapshot:
            return {}
        return await super()._fetch_records(consumer, cast(set[TP], snapshot), timeout, max_records)

    @override
    async def seek_to_committed(self) -> Mapping[TP, int]:
        """Seek the stream partitions to their committed offsets, or where the reset policy
        says when they have none (the changelogs are the recovery's to seek)."""
        changelogs = set(self.app.tables.changelog_topics)
        reset = self.app.conf.consumer_auto_offset_reset
        committed = await self.call_thread(
            seek_to_committed_or_reset,
            self._ensure_consumer(),
            reset,
            lambda tp: tp.topic in changelogs,
        )
        return cast(Mapping[TP, int], committed)


class StreamGate:
    """Which stream partitions a consumer keeps paused after an assignment until their seek.

    Faust resumes the stream partitions before it seeks them to their committed offsets and
    clears the streams' queues after: records fetched in between ran the fetcher's read offset
    ahead of what the agents were given, and those it skipped were lost. The gate holds every
    stream partition resumed between an assignment and the first `resume_flow` after a seek
    until that `resume_flow`; changelog partitions pass at once. docs/delivery.md, 'After a
    rebalance'."""

    def __init__(self) -> None:
        self.closed = False
        """From an assignment until the stream partitions are let through."""
        self.held: set[TP] = set()
        """Stream partitions Faust resumed while the gate was closed."""
        self.sought = False
        """Whether a seek to the committed offsets came after the last partition was held."""

    def assigned(self) -> None:
        """A new assignment: close the gate; nothing is held yet."""
        self.closed = True
        self.held = set()
        self.sought = False

    def hold(self, tps: set[TP], changelogs: set[str]) -> set[TP]:
        """The partitions of `tps` that may resume now; the stream partitions are held while
        the gate is closed, and a held partition waits for a seek that comes after it."""
        if not self.closed:
            return tps
        streams = {tp for tp in tps if tp.topic not in changelogs}
        if streams:
            self.held |= streams
            self.sought = False
        return tps - streams

    def seek_done(self) -> None:
        """The consumer's positions and read offsets were set to the committed offsets."""
        if self.closed and self.held:
            self.sought = True

    def release(self) -> set[TP]:
        """On `resume_flow`: the held partitions to resume, once a seek came after them (the
        streams' queues were cleared just before); else nothing, and the gate stays closed."""
        if not (self.closed and self.sought):
            return set()
        held, self.held = self.held, set()
        self.closed = False
        self.sought = False
        return held


class Consumer(driver.Consumer):
    """Faust's aiokafka consumer with evalstream's thread, eager delivery, and stream partitions
    kept paused after a rebalance until they are sought and their queues cleared
    (`StreamGate`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = StreamGate()

    @override
    async def on_partitions_assigned(self, assigned: set[TP], generation_id: int = 0) -> None:
        """Faust's, with the gate closed first."""
        self.gate.assigned()
        await super().on_partitions_assigned(assigned, generation_id)

    @override
    def resume_partitions(self, tps: Iterable[TP]) -> None:
        """Faust's, but for the stream partitions the gate holds."""
        changelogs = set(self.app.tables.changelog_topics)
        super().resume_partitions(self.gate.hold({ensure_TP(tp) for tp in tps}, changelogs))

    @override
    async def perform_seek(self) -> None:
        """Faust's seek to the committed offsets, which the held partitions wait for."""
        await super().perform_seek()
        self.gate.seek_done()

    @override
    def resume_flow(self) -> None:
        """Faust's, resuming first the partitions the gate held, if they were sought since."""
        held = self.gate.release()
        if held:
            super().resume_partitions(held & set(self.assignment()))
        super().resume_flow()

    @override
    def on_buffer_drop(self, tp: TP) -> None:
        """Faust's, which makes a partition active again: not one the gate holds."""
        super().on_buffer_drop(tp)
        if tp in self.gate.held:
            self.pause_partitions({tp})

    @override
    def _new_consumer_thread(self) -> ConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    @override
    async def wait_first(self, *coros: WaitArgT, timeout: Any = None) -> WaitResults:
        """Deliver a fetched message to its stream at once, in the fetcher's own task.

        Faust's fetcher hands every message over with `wait_first(on_message(message),
        suspend_flow.wait())`, so that a rebalance can interrupt a delivery blocked on a full
        stream buffer: four tasks, an `asyncio.wait` and three cancellations per message, more
        time than validating the run. Nearly always the delivery finishes without suspending
        (the buffer has room) and then schedules no task; when it does suspend, it goes on
        under Faust's own `wait_first`, interruptible as before; so does every delivery while
        the flow is suspended."""
        if len(coros) != 2 or timeout is not None or not asyncio.iscoroutine(coros[0]):
            return await super().wait_first(*coros, timeout=timeout)
        delivery, interrupt = cast(Coroutine[Any, None, Any], coros[0]), coros[1]
        if self.suspend_flow.is_set() or self.should_stop:
            return await super().wait_first(delivery, interrupt)
        try:
            rest = _run_until_it_suspends(delivery)
        except BaseException:
            _close(interrupt)
            raise
        if rest is None:
            _close(interrupt)
            return WaitResults(done=[], results=[], stopped=False)
        return await super().wait_first(rest, interrupt)

    def lag(self, topics: set[str]) -> dict[tuple[str, int], int]:
        """Messages behind the fetch high watermark, per assigned partition of `topics`: from
        the last offset handed to an agent, else from the committed offset."""
        thread = cast(ConsumerThread, self._thread)
        consumer = thread._ensure_consumer()
        lags: dict[tuple[str, int], int] = {}
        for tp in consumer.assignment():
            if tp.topic not in topics:
                continue
            highwater = consumer.highwater(tp)
            if highwater is None:
                continue
            key = TP(tp.topic, tp.partition)
            read = self._read_offset.get(key)
            next_offset = read + 1 if read is not None else self._committed_offset.get(key)
            lag = highwater - next_offset if next_offset is not None else highwater
            lags[(tp.topic, tp.partition)] = max(lag, 0)
        return lags


if sys.version_info >= (3, 12):

    def _run_until_it_suspends(coro: Coroutine[Any, None, Any]) -> Awaitable[Any] | None:
        """Run `coro` up to its first suspension; None when it finished, else what goes on.

        An eager task (3.12+): it runs at once, as the current task, so that what the
        delivery binds to its task (`wait_for`'s timeout since 3.12) is bound to its own, and
        it is scheduled only if it suspends."""
        task = asyncio.Task(coro, loop=asyncio.get_running_loop(), eager_start=True)
        if not task.done():
            return task
        task.result()  # its error, if it raised
        return None

else:

    def _run_until_it_suspends(coro: Coroutine[Any, None, Any]) -> Awaitable[Any] | None:
        """Run `coro` up to its first suspension; None when it finished, else what goes on.

        3.11 has no eager tasks: the first step runs in the fetcher's task, which is sound
        because nothing on Faust's delivery path binds the current task there (3.11's
        `wait_for` makes a task of its own); the rest runs as a task (`_Resumed`)."""
        try:
            pending = coro.send(None)
        except StopIteration:
            return None
        return _Resumed(coro, pending)


def _close(awaitable: WaitArgT) -> None:
    """Close a coroutine that will not be awaited (the interrupt of a finished delivery)."""
    if asyncio.iscoroutine(awaitable):
        awaitable.close()


class _Resumed:
    """An awaitable that goes on with a coroutine already run up to its first suspension (on
    `pending`): it hands `pending` to whoever drives it, then resumes the coroutine with what it
    is sent or thrown, as a Task would have."""

    def __init__(self, coro: Any, pending: Any) -> None:
        self.coro = coro
        self.pending = pending

    def __await__(self) -> Any:
        pending = self.pending
        while True:
            try:
                sent = yield pending
            except BaseException as exc:  # cancellation included: the coroutine sees it
                try:
                    pending = self.coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = self.coro.send(sent)
                except StopIteration as stop:
                    return stop.value


class Transport(driver.Transport):
    """Faust's aiokafka transport with evalstream's consumer and producer (Faust's app makes
    its producer with the consumer's transport)."""

    Consumer = Consumer
    Producer = Producer


def transport_for(app: faust.App) -> TransportT:
    """The consumer transport of `app`, for its broker URLs; it makes the app's producer too
    (Faust's own producer transport, which the app does not use for that, is left as it is)."""
    return Transport(app.conf.broker_consumer, app)


async def seek_to_committed_or_reset(
    consumer: aiokafka.AIOKafkaConsumer, reset: str, skip: Callable[[aiokafka.TopicPartition], bool]
) -> dict[aiokafka.TopicPartition, int | None]:
    """Seek each assigned partition to its committed offset, one without any to where the reset
    policy (`earliest` or `latest`) puts it; returns the committed offsets (None: none).

    aiokafka's `seek_to_committed` moves only partitions committed past 0 and leaves the others
    where the fetcher left them. Faust may have fetched records there that it then dropped (a
    partition paused while the fetch was in flight), so a worker restarted before its first
    commit would skip them. `skip` names partitions whose position is not ours to set (table
    changelogs, which the recovery seeks itself)."""
    committed: dict[aiokafka.TopicPartition, int | None] = await consumer.seek_to_committed()
    never = [tp for tp, offset in committed.items() if offset is None and not skip(tp)]
    for tp, offset in committed.items():
        if offset == 0 and not skip(tp):
            consumer.seek(tp, 0)
    if never and reset == "latest":
        await consumer.seek_to_end(*never)
    elif never:
        await consumer.seek_to_beginning(*never)
    return committed
