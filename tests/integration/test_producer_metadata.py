"""The worker's producer keeps the metadata of every topic it sends to or creates. aiokafka
tracks a topic only when its first send found no metadata for it, and asks for the tracked
topics' metadata only (every topic's while it tracks none); Faust asks for every topic's after
creating one. So a topic could be known untracked, and a send to a new topic then narrowed the
metadata: a record waiting for the untracked topic was never sent, and the flush before every
commit waited for ever (a worker that stopped processing at its start, seen twice on a loaded
2-core machine). And a table changelog it had not written to would have no partitions for the
query API's owner lookup."""

from __future__ import annotations

import asyncio
import itertools

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from stream_app.service.app import create_app
from stream_app.service.faust_producer import TrackingProducer
from tests.integration.harness import Broker, settings_for

NAMES = itertools.count(1)
LINGER_MS = 2000  # the first record waits in the producer while a send narrows the metadata


async def known_without_tracking(producer: TrackingProducer, topic: str) -> None:
    """Every topic's metadata, while the producer tracks none (what Faust's create_topic asks
    for after it creates a topic)."""
    deadline = asyncio.get_running_loop().time() + 30
    while producer.client.cluster.partitions_for_topic(topic) is None:
        assert asyncio.get_running_loop().time() < deadline, f"no metadata for {topic}"
        await producer.client.force_metadata_update()


async def deliver_after_narrowing(bootstrap: str, prefix: str) -> None:
    known, new = f"{prefix}-known", f"{prefix}-new"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    producer = TrackingProducer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS)
    try:
        await admin.create_topics([NewTopic(known, 4, 1)])
        await producer.start()
        await known_without_tracking(producer, known)
        await admin.create_topics([NewTopic(new, 4, 1)])
        lingering = await producer.send(known, b"first", partition=1)
        delivered_new = await producer.send(new, b"second", partition=0)  # narrows the fetch
        await asyncio.wait_for(delivered_new, 30)
        assert producer.client.cluster.leader_for_partition(TopicPartition(known, 1)) is not None
        await asyncio.wait_for(lingering, 30)  # stuck for ever with aiokafka's own producer
    finally:
        await producer.stop()
        await admin.close()


def test_a_record_for_a_topic_known_from_a_full_fetch_is_delivered(broker: Broker) -> None:
    bootstrap = settings_for(broker).bootstrap_servers[0]
    asyncio.run(asyncio.wait_for(deliver_after_narrowing(bootstrap, f"narrow-{next(NAMES)}"), 90))


async def owner_lookup_after_narrowing(broker: Broker, prefix: str) -> None:
    settings = settings_for(broker)
    app = create_app(settings)
    producer = app.producer
    await producer.start()
    try:
        changelog, new = f"{prefix}-changelog", f"{prefix}-new"
        await producer.create_topic(changelog, 4, 1, compacting=True)  # as Faust's tables do
        await producer.create_topic(new, 4, 1)
        await asyncio.wait_for(await producer.send(new, b"k", b"v", 0, None, None), 30)
        # The query API's owner lookup (Faust's router) hashes the key over the changelog's
        # partitions in this producer's metadata.
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            try:
                assert producer.key_partition(changelog, b"exp/T1").partition in range(4)
                break
            except TypeError:  # no metadata for the changelog
                assert asyncio.get_running_loop().time() < deadline, "changelog not tracked"
                await asyncio.sleep(0.2)
    finally:
        await producer.stop()


def test_a_created_changelog_keeps_its_partitions_for_the_owner_lookup(broker: Broker) -> None:
    asyncio.run(asyncio.wait_for(owner_lookup_after_narrowing(broker, f"owner-{next(NAMES)}"), 90))
