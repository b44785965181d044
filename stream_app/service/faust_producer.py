"""evalstream's Faust producer: aiokafka's producer that keeps every topic it sends to in the
metadata it asks for, given to Faust through its extension point (`Producer._producer_type`,
`Transport.Producer`).

Why: aiokafka tracks a topic when its first send finds no metadata for it, and asks for the
metadata of the tracked topics only (of every topic while it tracks none). Faust fetches every
topic's metadata after it creates a topic, so the worker's output topics become known without
being tracked; the first send to a topic missing from that fetch then narrows the metadata to
the tracked topics, the others' leaders turn unknown, and a record already waiting for one of
them is never sent: the flush before every commit waits for it, and the worker stops processing
(tests/integration/test_producer_metadata.py)."""

from __future__ import annotations

from typing import Any

import aiokafka
from faust.transport.drivers import aiokafka as driver


class TrackingProducer(aiokafka.AIOKafkaProducer):  # type: ignore[misc]  # aiokafka: untyped
    """aiokafka's producer; a topic is tracked from its first send on."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tracked: set[str] = set()

    async def send(self, topic: str, *args: Any, **kwargs: Any) -> Any:
        """Send as aiokafka does, the topic tracked first (its metadata asked for from now on)."""
        if topic not in self.tracked:
            self.tracked.add(topic)
            self.client.add_topic(topic)  # a metadata update is due: no need to wait for it
        return await super().send(topic, *args, **kwargs)


class Producer(driver.Producer):
    """Faust's aiokafka producer, with `TrackingProducer` under it."""

    @property
    def _producer_type(self) -> type[aiokafka.AIOKafkaProducer]:
        return TrackingProducer
