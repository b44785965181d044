"""`seek_to_committed_or_reset` against the test broker and a real aiokafka consumer.

With the snapshot of active partitions (`tests/service/test_fetch_snapshot.py`) it closes one
hole: a worker restarted before its first commit skipped the runs its consumer had fetched
during table recovery (Faust drained them, then dropped them as paused, and nothing rewound the
position because there was no committed offset to rewind to)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from stream_app.service.faust_transport import seek_to_committed_or_reset
from stream_app.service.kafka_client import client_kwargs, ensure_topics
from tests.integration.harness import Broker, settings_for

TP = TopicPartition("compat", 0)


async def consumer_at_end(broker: Broker, records: int) -> AIOKafkaConsumer:
    """A group consumer (no commits yet) that has read `records` records of `TP`."""
    settings = settings_for(broker)
    await ensure_topics(settings, [TP.topic])
    producer = AIOKafkaProducer(**client_kwargs(settings))
    await producer.start()
    try:
        for i in range(records):
            await producer.send_and_wait(TP.topic, str(i).encode(), partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        **client_kwargs(settings),
        group_id="compat",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    consumer.assign([TP])
    read = 0
    async with asyncio.timeout(20):
        while read < records:
            read += len((await consumer.getmany(TP, timeout_ms=500)).get(TP, []))
    assert await consumer.position(TP) == records
    return consumer


def test_a_partition_never_committed_is_rewound_to_the_reset_position(
    broker: Broker,
) -> None:
    async def scenario() -> list[Any]:
        consumer = await consumer_at_end(broker, 5)
        try:
            # aiokafka's own seek leaves it where the fetcher left it: the hole
            await consumer.seek_to_committed()
            plain = await consumer.position(TP)
            committed = await seek_to_committed_or_reset(consumer, "earliest", lambda tp: False)
            rewound = await consumer.position(TP)
            await consumer.seek_to_end(TP)
            skipped = await seek_to_committed_or_reset(consumer, "earliest", lambda tp: True)
            untouched = await consumer.position(TP)
            await consumer.commit({TP: 0})
            await seek_to_committed_or_reset(consumer, "latest", lambda tp: False)
            at_zero = await consumer.position(TP)
            await consumer.commit({TP: 3})
            await consumer.seek_to_end(TP)
            await seek_to_committed_or_reset(consumer, "earliest", lambda tp: False)
            at_three = await consumer.position(TP)
            return [plain, committed, rewound, skipped, untouched, at_zero, at_three]
        finally:
            await consumer.stop()

    plain, committed, rewound, skipped, untouched, at_zero, at_three = asyncio.run(scenario())
    assert plain == 5
    assert committed == {TP: None}
    assert rewound == 0
    assert skipped == {TP: None}
    assert untouched == 5
    assert at_zero == 0  # committed 0 is a position, not "none"
    assert at_three == 3


def test_latest_policy_puts_a_never_committed_partition_at_its_end(
    broker: Broker,
) -> None:
    async def scenario() -> int:
        consumer = await consumer_at_end(broker, 4)
        try:
            consumer.seek(TP, 1)
            await seek_to_committed_or_reset(consumer, "latest", lambda tp: False)
            position: int = await consumer.position(TP)
            return position
        finally:
            await consumer.stop()

    assert asyncio.run(scenario()) == 4
