"""Every access to Faust's and aiokafka's private parts, in one place: four fixes to Faust's
aiokafka driver and consumer, installed by the app, and the few private attributes the worker reads.

High watermarks from fetch responses, for Faust's table recovery.

Faust recovers a table by reading its changelog up to `end_offsets()` (a ListOffsets request).
The embedded Tansu broker can answer ListOffsets with an offset *below* the partition's real end
(seen: 234 for a partition holding 240 records), and Faust then stops recovery early and silently
loses the last updates of a window. A Fetch response carries the true high watermark on every
broker, so we take it from there. On Tansu only (`broker_kind`): Apache Kafka's answer is right.

Honest stream positions (`install_consumer_positions`): a worker restarted before its first
commit must not skip the records its consumer fetched during table recovery.

Eager delivery (`install_eager_delivery`): a fetched message goes to its stream without the four
tasks Faust creates for each.

A bounded fetch wait. Faust hard-codes `fetch_max_wait_ms=1500` for its consumer. A broker that
holds a fetch for the whole wait when it has little data (Tansu does) then adds up to 1.5 s per
hop, and evalstream has three hops; `install_fetch_wait` sets the wait from the settings
(`fetch_max_wait_s`: 0.05 s on Tansu unless set). Apache Kafka answers as soon as data arrives,
so there Faust's wait stands unless a user sets one.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from aiokafka import AIOKafkaConsumer, TopicPartition

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0


async def fetch_high_watermarks(
    consumer_kwargs: Mapping[str, Any], partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """The high watermark of each partition, read from a Fetch response of a throw-away consumer
    (no group, no commits), starting at the ListOffsets answer, which is never above the truth."""
    tps = list(partitions)
    if not tps:
        return {}
    consumer = AIOKafkaConsumer(
        **consumer_kwargs,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_bytes=1024 * 1024,
        max_partition_fetch_bytes=64 * 1024,
    )
    await consumer.start()
    try:
        lower = await consumer.end_offsets(tps)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, lower[tp])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FETCH_TIMEOUT_S
        result: dict[TopicPartition, int] = {}
        while len(result) < len(tps):
            await consumer.getmany(timeout_ms=200)
            for tp in tps:
                hw = consumer.highwater(tp)
                if hw is not None:
                    result[tp] = max(hw, lower[tp])
            if loop.time() > deadline:
                missing = [tp for tp in tps if tp not in result]
                log.warning("no fetch high watermark for %s; using ListOffsets", missing)
                for tp in missing:
                    result[tp] = lower[tp]
                break
        return result
    finally:
        await consumer.stop()


def install_fetch_highwaters(consumer_kwargs: Callable[[], Mapping[str, Any]]) -> None:
    """Make Faust's aiokafka driver take recovery highwaters from fetch responses."""
    from faust.transport.drivers import aiokafka as driver

    thread_cls: Any = driver.AIOKafkaConsumerThread
    thread_cls._evalstream_consumer_kwargs = consumer_kwargs  # the latest app's connection
    if getattr(thread_cls, "_evalstream_fetch_highwaters", False):
        return
    original = thread_cls._highwaters

    async def _highwaters(self: Any, partitions: list[Any]) -> Mapping[Any, int]:
        if self.consumer.in_transaction:
            return await original(self, partitions)  # type: ignore[no-any-return]
        tps = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        found = await fetch_high_watermarks(thread_cls._evalstream_consumer_kwargs(), tps)
        return {tp: found[TopicPartition(tp.topic, tp.partition)] for tp in partitions}

    thread_cls._highwaters = _highwaters
    thread_cls._evalstream_fetch_highwaters = True


def install_fetch_wait(max_wait_ms: int) -> None:
    """Make the consumers Faust creates (the worker's group consumer and client-only ones) wait at
    most `max_wait_ms` for data per fetch."""
    from faust.transport.drivers import aiokafka as driver

    thread_cls: Any = driver.AIOKafkaConsumerThread
    for factory in ("_create_worker_consumer", "_create_client_consumer"):
        original = getattr(thread_cls, f"_evalstream_original{factory}", None)
        if original is None:
            original = getattr(thread_cls, factory)
            setattr(thread_cls, f"_evalstream_original{factory}", original)
        setattr(thread_cls, factory, _bounded(original, max_wait_ms))


def _bounded(create: Callable[..., Any], max_wait_ms: int) -> Callable[..., Any]:
    def create_consumer(self: Any, transport: Any) -> Any:
        consumer = create(self, transport)
        consumer._fetch_max_wait_ms = max_wait_ms  # read by aiokafka's Fetcher at start()
        return consumer

    return create_consumer


def install_consumer_positions() -> None:
    """Make Faust's aiokafka driver keep the position of every stream partition honest.

    Two holes, one loss: a worker restarted before its first commit skipped the runs its
    consumer fetched during table recovery. (1) Faust hands its live set of active partitions
    to a fetch that waits in the consumer thread; when recovery pauses the changelogs, the set
    empties, and aiokafka reads an empty set as "every partition": it drains the stream
    partitions too, and Faust drops those records as not active. (2) Faust's seek back to the
    committed offsets (`perform_seek`, after recovery) moves nothing that has no committed
    offset. The fix: fetch from a snapshot of the set (none when it is empty), and seek a
    partition without a committed offset to where the reset policy says."""
    from faust.transport.drivers import aiokafka as driver

    thread_cls: Any = driver.AIOKafkaConsumerThread
    if getattr(thread_cls, "_evalstream_positions", False):
        return
    fetch_records = thread_cls._fetch_records

    async def _fetch_records(
        self: Any, consumer: Any, active: Any, timeout: Any = None, max_records: Any = None
    ) -> Any:
        snapshot = None if active is None else frozenset(active)
        if snapshot is not None and not snapshot:
            return {}
        return await fetch_records(self, consumer, snapshot, timeout, max_records)

    async def seek_to_committed(self: Any) -> Mapping[Any, int | None]:
        changelogs = set(self.app.tables.changelog_topics)
        reset = self.app.conf.consumer_auto_offset_reset
        return await self.call_thread(  # type: ignore[no-any-return]
            seek_to_committed_or_reset,
            self._ensure_consumer(),
            reset,
            lambda tp: tp.topic in changelogs,
        )

    thread_cls._fetch_records = _fetch_records
    thread_cls.seek_to_committed = seek_to_committed
    thread_cls._evalstream_positions = True


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


EAGER_TASKS: Final = sys.version_info >= (3, 12)
"""Whether asyncio can start a task eagerly (`Task(..., eager_start=True)`)."""


def install_eager_delivery() -> None:
    """Deliver each fetched message to its stream without four tasks per message.

    Faust's fetcher hands every message to its stream with
    `wait_first(on_message(message), suspend_flow.wait())`, so that a rebalance can interrupt a
    delivery blocked on a full stream buffer. That makes four tasks, an `asyncio.wait` and
    three cancellations per message: in a profile of the worker, more time than validating the
    run. Here the delivery runs at once, in the fetcher's own task; nearly always it finishes
    without suspending (the buffer has room) and costs no task at all. When it does suspend,
    it goes on under Faust's own `wait_first`, interruptible as before; so does every delivery
    while the flow is suspended."""
    from faust.transport.consumer import Consumer

    if getattr(Consumer, "_evalstream_eager_delivery", False):
        return
    wait_first = Consumer.wait_first

    async def eager_wait_first(self: Any, *coros: Any, timeout: Any = None) -> Any:
        if len(coros) != 2 or timeout is not None or not asyncio.iscoroutine(coros[0]):
            return await wait_first(self, *coros, timeout=timeout)
        delivery, interrupt = coros
        if self.suspend_flow.is_set() or self.should_stop:
            return await wait_first(self, delivery, interrupt)
        if EAGER_TASKS:  # Python 3.12+: the delivery starts now, as a task of its own
            eager: dict[str, Any] = {"eager_start": True}
            task: asyncio.Task[Any] = asyncio.Task(delivery, **eager)
            if task.done():
                interrupt.close()
                return task.result()
            return await wait_first(self, task, interrupt)
        # Python 3.11: the delivery's first steps run in the fetcher's task. Nothing on Faust's
        # delivery path reads the current task before it first suspends there (its `wait_for`
        # makes a task of its own on 3.11); from 3.12 on, `wait_for` reads it, hence the above.
        try:
            pending = delivery.send(None)
        except StopIteration:
            interrupt.close()
            return None
        except BaseException:
            interrupt.close()
            raise
        return await wait_first(self, _Resumed(delivery, pending), interrupt)

    Consumer.wait_first = eager_wait_first  # type: ignore[method-assign]
    Consumer._evalstream_eager_delivery = True  # type: ignore[attr-defined]


def withhold_acks(events: Iterable[Any]) -> None:
    """Keep a batch's offsets from ever being committed by this process.

    Faust's `take_events` acks every event of a batch when the batch's loop exits, also when
    the batch failed or was cancelled mid-way, and the next commit would then skip events whose
    outputs were never written. Marking the messages acked *without* telling the consumer makes
    that late ack a no-op: the consumer never counts their offsets as done, so it commits nothing
    at or past them (commits advance over contiguous acked offsets only), and Faust's wait for
    unacked messages at shutdown does not wait for them either. The next worker to own the
    partition reads them again."""
    for event in events:
        event.message.acked = True


def consumer_lag(consumer: Any, topics: set[str]) -> dict[tuple[str, int], int]:
    """Messages behind the fetch high watermark, per assigned partition of `topics`: from the
    consumer's last offset handed to an agent (Faust keeps it in a private map), else from its
    committed offset."""
    lags: dict[tuple[str, int], int] = {}
    for tp in consumer.assignment():
        if tp.topic not in topics:
            continue
        highwater = consumer.highwater(tp)
        if highwater is None:
            continue
        read = consumer._read_offset.get(tp)
        next_offset = read + 1 if read is not None else consumer._committed_offset.get(tp)
        lag = highwater - next_offset if next_offset is not None else highwater
        lags[(tp.topic, tp.partition)] = max(lag, 0)
    return lags


def owned_partitions(app: Any, topic: str) -> set[int]:
    """The partitions of `topic` assigned to this worker as active (not standby)."""
    return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}


class ChangelogTable:
    """A Faust table whose changelog records go out through the stage's own confirmed sends.

    Faust sends a table's changelog records from a background buffer and does not fail the
    batch when the broker refuses one: the offsets are committed, and the state lost. Here the
    value goes into the table's store directly (Faust's private `data`) and the record, the same
    raw key and value Faust would write, to the key's partition of the changelog through
    `Outputs.send`, so the batch runner confirms it like every other output. Faust's recovery
    reads these records as its own."""

    def __init__(self, table: Any, outputs: Any, partition_of: Callable[[bytes], int]) -> None:
        self.table = table
        self.outputs = outputs
        self.partition_of = partition_of
        """The partition of a key: the one its stage reads it from (co-partitioned)."""
        self.changelog: str = table.changelog_topic.get_topic_name()

    def get(self, key: bytes) -> bytes | None:
        """The stored value, or None."""
        value: bytes | None = self.table.data.get(key)
        return value

    def items(self) -> Iterable[tuple[bytes, bytes | None]]:
        """Every stored key and value."""
        return list(self.table.data.items())

    async def put(self, key: bytes, value: bytes) -> None:
        """Store the value and send it to the changelog."""
        self.table.data[key] = value
        await self.outputs.send(self.changelog, key, value, self.partition_of(key))

    async def delete(self, key: bytes) -> None:
        """Remove the key and send its tombstone."""
        self.table.data.pop(key, None)
        await self.outputs.send(self.changelog, key, None, self.partition_of(key))


async def seek_to_committed_or_reset(
    consumer: AIOKafkaConsumer, reset: str, skip: Callable[[TopicPartition], bool]
) -> dict[TopicPartition, int | None]:
    """Seek each assigned partition to its committed offset, one without any to where the reset
    policy (`earliest` or `latest`) puts it; returns the committed offsets (None: none).

    aiokafka's `seek_to_committed` moves only partitions committed past 0 and leaves the others
    where the fetcher left them. Faust may have fetched records there that it then dropped (a
    partition paused while the fetch was in flight), so a worker restarted before its first
    commit would skip them. `skip` names partitions whose position is not ours to set (table
    changelogs, which the recovery seeks itself)."""
    committed: dict[TopicPartition, int | None] = await consumer.seek_to_committed()
    never = [tp for tp, offset in committed.items() if offset is None and not skip(tp)]
    for tp, offset in committed.items():
        if offset == 0 and not skip(tp):
            consumer.seek(tp, 0)
    if never and reset == "latest":
        await consumer.seek_to_end(*never)
    elif never:
        await consumer.seek_to_beginning(*never)
    return committed
