"""evalstream's Faust producer: aiokafka's producer that keeps every topic it sends to or
creates in the metadata it asks for, given to Faust through its extension points
(`Producer._producer_type`, `Transport.Producer`).

Why: aiokafka tracks a topic when its first send finds no metadata for it, and asks for the
metadata of the tracked topics only (of every topic while it tracks none). Faust fetches every
topic's metadata after it creates a topic, so the worker's output topics become known without
being tracked; the first send to a topic missing from that fetch then narrows the metadata to
the tracked topics, the others' leaders turn unknown, and a record already waiting for one of
them is never sent: the flush before every commit waits for it, and the worker stops processing
(tests/integration/test_producer_metadata.py). A created topic is tracked too: the query API
finds a key's owner from its table changelog's partitions in this metadata, whether or not
this worker has written to that changelog yet."""

from __future__ import annotations

from typing import Any, cast

import aiokafka
from faust.transport.drivers import aiokafka as driver


class TrackingProducer(aiokafka.AIOKafkaProducer):  # type: ignore[misc]  # aiokafka: untyped
    """aiokafka's producer; a topic is tracked from its first send on."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tracked: set[str] = set()

    def track(self, topic: str) -> None:
        """Ask for `topic`'s metadata from now on (an update is due at once; nothing waits for
        it here: a send waits for the metadata it needs by itself)."""
        if topic not in self.tracked:
            self.tracked.add(topic)
            self.client.add_topic(topic)

    async def send(self, topic: str, *args: Any, **kwargs: Any) -> Any:
        """Send as aiokafka does, the topic tracked first."""
        self.track(topic)
        return await super().send(topic, *args, **kwargs)


class Producer(driver.Producer):
    """Faust's aiokafka producer, with `TrackingProducer` under it; the topics Faust creates
    (the tables' changelogs) are tracked once they exist."""

    @property
    def _producer_type(self) -> type[aiokafka.AIOKafkaProducer]:
        return TrackingProducer

    async def create_topic(self, topic: str, *args: Any, **kwargs: Any) -> None:
        """Create the topic as Faust does, then track it (not before: asking for the metadata of
        a topic that does not exist yet may have the broker create it, with its defaults)."""
        await super().create_topic(topic, *args, **kwargs)
        cast(TrackingProducer, self._ensure_producer()).track(topic)
