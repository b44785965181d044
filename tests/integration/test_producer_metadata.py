"""A record for a topic the producer knows only from a metadata fetch of every topic (Faust
fetches one after creating each topic) is delivered, even when a send to a new topic narrows the
producer's metadata to the topics it tracks. aiokafka tracks a topic only when its first send
found no metadata for it: narrowed, an untracked topic's leader stays unknown, its batch waits
for ever, and so does the flush before every commit (a worker that stopped processing at its
start, seen twice on a loaded 2-core machine)."""

from __future__ import annotations

import asyncio
import itertools

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from stream_app.service.faust_producer import TrackingProducer
from tests.integration.harness import Broker, settings_for

NAMES = itertools.count(1)


async def deliver_after_narrowing(bootstrap: str, prefix: str) -> None:
    known, new = f"{prefix}-known", f"{prefix}-new"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    producer = TrackingProducer(bootstrap_servers=bootstrap, linger_ms=50)
    try:
        await admin.create_topics([NewTopic(known, 4, 1)])
        await producer.start()
        # Every topic's metadata, while the producer tracks none (what Faust's create_topic
        # asks for after it creates a changelog).
        deadline = asyncio.get_running_loop().time() + 30
        while producer.client.cluster.partitions_for_topic(known) is None:
            assert asyncio.get_running_loop().time() < deadline, "no metadata for the topic"
            await producer.client.force_metadata_update()
        await admin.create_topics([NewTopic(new, 4, 1)])
        lingering = await producer.send(known, b"first", partition=1)  # held by linger_ms
        delivered_new = await producer.send(new, b"second", partition=0)  # narrows the fetch
        await asyncio.wait_for(delivered_new, 30)
        await asyncio.wait_for(lingering, 30)  # stuck for ever with aiokafka's own producer
    finally:
        await producer.stop()
        await admin.close()


def test_a_record_for_a_topic_known_from_a_full_fetch_is_delivered(broker: Broker) -> None:
    bootstrap = settings_for(broker).bootstrap_servers[0]
    asyncio.run(asyncio.wait_for(deliver_after_narrowing(bootstrap, f"narrow-{next(NAMES)}"), 90))
