"""In-memory doubles for driving a service stage without a broker: a list for its sends, a dict
for its table, and records made from the helpers' events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Coroutine
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from stream_app import __version__
from stream_app.service.exporter import Exporter
from stream_app.service.outputs import Outputs, Record
from stream_app.service.settings import Settings, load_settings


class Sends:
    """The `Send` of the stages, as a list of (topic, key, value, partition). Each send returns a
    future; `auto_ack=False` leaves them pending so a test can see what waits for the broker."""

    def __init__(self, auto_ack: bool = True) -> None:
        self.sent: list[tuple[str, bytes | None, bytes | None, int | None]] = []
        self.acks: list[asyncio.Future[None]] = []
        self.auto_ack = auto_ack
        self.fail_on: str | None = None

    async def __call__(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None
    ) -> Awaitable[Any]:
        if topic == self.fail_on:
            raise ConnectionError(f"send to {topic} failed")
        self.sent.append((topic, key, value, partition))
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.auto_ack:
            ack.set_result(None)
        self.acks.append(ack)
        return ack

    def ack_pending(self) -> None:
        """The broker acknowledges every send still waiting."""
        for ack in self.acks:
            if not ack.done():
                ack.set_result(None)

    async def acked_until(self, task: asyncio.Future[Any]) -> Any:
        """Acknowledge sends as they come until `task` is done; its result."""
        while not task.done():
            self.ack_pending()
            await asyncio.sleep(0)
        return task.result()

    def to(self, topic: str) -> list[dict[str, Any]]:
        """The JSON values sent to `topic`, in order (tombstones left out: see `tombstones`)."""
        return [
            json.loads(value) for t, _, value, _ in self.sent if t == topic and value is not None
        ]

    def tombstones(self, topic: str) -> list[bytes | None]:
        """The keys of the tombstones sent to `topic`, in order."""
        return [key for t, key, value, _ in self.sent if t == topic and value is None]

    def keys(self, topic: str) -> list[bytes | None]:
        return [key for t, key, _, _ in self.sent if t == topic]


class Table(dict[bytes, bytes]):
    """A stage's table as a dict that records every write, with how many sends were still
    unacknowledged at that moment."""

    def __init__(self, sends: Sends) -> None:
        super().__init__()
        self.sends = sends
        self.writes: list[tuple[bytes, int]] = []
        self.deletes: list[tuple[bytes, int]] = []

    async def put(self, key: bytes, value: bytes) -> None:
        pending = sum(1 for ack in self.sends.acks if not ack.done())
        self.writes.append((key, pending))
        self[key] = value

    async def delete(self, key: bytes) -> None:
        pending = sum(1 for ack in self.sends.acks if not ack.done())
        self.deletes.append((key, pending))
        self.pop(key, None)


def settings(**overrides: Any) -> Settings:
    return load_settings(partitions=4, **overrides)


Wiring = tuple[Settings, Sends, Exporter, Outputs]


def wiring(**overrides: Any) -> Wiring:
    """Settings (4 partitions, `overrides`), a list for the sends, the exporter, and `Outputs`."""
    config = settings(**overrides)
    sends = Sends()
    exporter = Exporter(__version__)
    return config, sends, exporter, Outputs(sends, config, exporter)


def records(topic: str, values: list[bytes], key: bytes | None = None) -> list[Record]:
    return [Record(topic, 0, offset, key, value) for offset, value in enumerate(values)]


def samples(exporter: Exporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The exporter's `/metrics` text, parsed: (sample name, sorted labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(exporter.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def turns_during(work: Coroutine[Any, Any, Any]) -> int:
    """How many turns of the event loop another task got while `work` ran: 0 when `work` held
    the loop from its start to its end."""
    done = False
    turns = 0

    async def other() -> None:
        nonlocal turns
        while not done:  # each pass: a turn `work` gave it
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    try:
        await work
    finally:
        done = True
    await task
    return turns
