"""`seek_to_committed_or_reset` against the test broker and a real aiokafka consumer.

With the snapshot of active partitions (`tests/service/test_fetch_snapshot.py`) it closes one
hole: a worker restarted before its first commit skipped the runs its consumer had fetched
during table recovery (Faust drained them, then dropped them as paused, and nothing rewound the
position because there was no committed offset to rewind to)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from stream_app.service.faust_transport import seek_to_committed_or_reset
from stream_app.service.kafka_client import client_kwargs, ensure_topics
from tests.integration.harness import Broker, settings_for


@pytest.fixture
def tp(broker: Broker) -> TopicPartition:
    """A partition of the test's own (the test broker may be shared)."""
    return TopicPartition(f"{settings_for(broker).app_id}-compat", 0)


async def consumer_at_end(broker: Broker, tp: TopicPartition, records: int) -> AIOKafkaConsumer:
    """A group consumer (no commits yet) that has read `records` records of `tp`."""
    settings = settings_for(broker)
    await ensure_topics(settings, [tp.topic])
    producer = AIOKafkaProducer(**client_kwargs(settings))
    await producer.start()
    try:
        for i in range(records):
            await producer.send_and_wait(tp.topic, str(i).encode(), partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        **client_kwargs(settings),
        group_id=tp.topic,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    consumer.assign([tp])
    read = 0
    async with asyncio.timeout(20):
        while read < records:
            read += len((await consumer.getmany(tp, timeout_ms=500)).get(tp, []))
    assert await consumer.position(tp) == records
    return consumer


def test_a_partition_never_committed_is_rewound_to_the_reset_position(
    broker: Broker, tp: TopicPartition
) -> None:
    async def scenario() -> list[Any]:
        consumer = await consumer_at_end(broker, tp, 5)
        try:
            # aiokafka's own seek leaves it where the fetcher left it: the hole
            await consumer.seek_to_committed()
            plain = await consumer.position(tp)
            committed = await seek_to_committed_or_reset(consumer, "earliest", lambda _: False)
            rewound = await consumer.position(tp)
            await consumer.seek_to_end(tp)
            skipped = await seek_to_committed_or_reset(consumer, "earliest", lambda _: True)
            untouched = await consumer.position(tp)
            await consumer.commit({tp: 0})
            await seek_to_committed_or_reset(consumer, "latest", lambda _: False)
            at_zero = await consumer.position(tp)
            await consumer.commit({tp: 3})
            await consumer.seek_to_end(tp)
            await seek_to_committed_or_reset(consumer, "earliest", lambda _: False)
            at_three = await consumer.position(tp)
            return [plain, committed, rewound, skipped, untouched, at_zero, at_three]
        finally:
            await consumer.stop()

    plain, committed, rewound, skipped, untouched, at_zero, at_three = asyncio.run(scenario())
    assert plain == 5
    assert committed == {tp: None}
    assert rewound == 0
    assert skipped == {tp: None}
    assert untouched == 5
    assert at_zero == 0  # committed 0 is a position, not "none"
    assert at_three == 3


def test_latest_policy_puts_a_never_committed_partition_at_its_end(
    broker: Broker, tp: TopicPartition
) -> None:
    async def scenario() -> int:
        consumer = await consumer_at_end(broker, tp, 4)
        try:
            consumer.seek(tp, 1)
            await seek_to_committed_or_reset(consumer, "latest", lambda _: False)
            position: int = await consumer.position(tp)
            return position
        finally:
            await consumer.stop()

    assert asyncio.run(scenario()) == 4
