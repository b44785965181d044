"""evalstream's Faust producer: aiokafka's producer that keeps every topic it sends to or
creates in the metadata it asks for, given to Faust through its extension points
(`Producer._producer_type`, `Transport.Producer`). aiokafka asks only for its tracked topics'
metadata and tracks a topic only when a first send found none; a topic known untracked (from
Faust's fetch of every topic) lost its leader once a new topic narrowed the metadata, and a
record waiting for it was never sent: the worker stopped processing. docs/brokers.md, 'Which
broker needs which workaround'. Its buffer counts what waits without reading a setting: Faust
asks for that count before it delivers every message."""

from __future__ import annotations

from typing import Any, cast

import aiokafka
from faust.transport.drivers import aiokafka as driver
from faust.transport.producer import ProducerBuffer
from typing_extensions import override


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


class CountingBuffer(ProducerBuffer):
    """Faust's buffer of messages waiting to be produced, for a producer that is not threaded.
    Its `size` is asked before every message is delivered to a stream (`wait_until_ebb`), and
    Faust's reads the `producer_threaded` setting each time: a microsecond a message."""

    @override
    @property
    def size(self) -> int:
        return self.pending.qsize()


class Producer(driver.Producer):
    """Faust's aiokafka producer, with `TrackingProducer` under it; the topics Faust creates
    (the tables' changelogs) are tracked once they exist."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.app.conf.producer_threaded:  # before it starts: nothing is in it yet
            buffer = CountingBuffer(loop=self.loop, beacon=self.beacon)
            buffer.app = self.app
            self.buffer = buffer

    @override
    @property
    def _producer_type(self) -> type[aiokafka.AIOKafkaProducer]:
        return TrackingProducer

    @override
    async def create_topic(self, topic: str, *args: Any, **kwargs: Any) -> None:
        """Create the topic as Faust does, then track it (not before: asking for the metadata of
        a topic that does not exist yet may have the broker create it, with its defaults)."""
        await super().create_topic(topic, *args, **kwargs)
        cast(TrackingProducer, self._ensure_producer()).track(topic)
