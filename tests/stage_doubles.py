"""In-memory doubles for driving a service stage without a broker: a list for its sends, a dict
for its table, and records made from the helpers' events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Coroutine
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from schemas.run_bundle import bundle_runs
from stream_app import __version__
from stream_app.core.ingest import evaluate_run
from stream_app.service.exporter import Exporter
from stream_app.service.outputs import Outputs, Record
from stream_app.service.settings import Settings, load_settings
from tests.helpers import encode


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
    """A stage's table as a dict: what a batch puts and deletes is held (and read back) until
    `Outputs.confirm` calls `write`; each write is recorded with how many sends were still
    unacknowledged at that moment. A test may set the dict's items directly (a stored state)."""

    def __init__(self, sends: Sends) -> None:
        super().__init__()
        self.sends = sends
        self.held: dict[bytes, bytes | None] = {}
        self.writes: list[tuple[bytes, int]] = []
        self.deletes: list[tuple[bytes, int]] = []

    def get(self, key: bytes, default: Any = None) -> Any:
        if key in self.held:
            return self.held[key]
        return super().get(key, default)

    def items(self) -> Any:
        merged = {**dict(super().items()), **self.held}
        return [(k, v) for k, v in merged.items() if v is not None]

    def all_keys(self) -> list[bytes]:
        return [k for k, _ in self.items()]

    async def put(self, key: bytes, value: bytes) -> None:
        self.held[key] = value

    async def delete(self, key: bytes) -> None:
        self.held[key] = None

    def rollback(self) -> None:
        self.held.clear()

    async def write(self) -> None:
        pending = sum(1 for ack in self.sends.acks if not ack.done())
        held, self.held = self.held, {}
        for key, value in held.items():
            if value is None:
                self.deletes.append((key, pending))
                self.pop(key, None)
            else:
                self.writes.append((key, pending))
                self[key] = value


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


def metrics_json(config: Settings, event: dict[str, Any]) -> bytes:
    """A run event's metrics, as the validate stage forwards them."""
    metrics = evaluate_run(encode(event), config)
    assert not hasattr(metrics, "reason"), metrics
    return metrics.model_dump_json().encode()


def forwarded(config: Settings, *events: dict[str, Any]) -> list[Record]:
    """Runs as the validate stage forwards them, a bundle of one run per message."""
    values = [bundle_runs([metrics_json(config, e)], 1 << 20)[0] for e in events]
    return records(config.topics.runs_by_tier, values)


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


async def recover(stage: Any, owned: set[int]) -> int:
    """What the worker does once a stage's table is recovered: nothing re-published, the gauges
    of the partitions it newly owns restored from the table. Returns the keys restored."""
    newly = await stage.on_recover(owned)
    count: int = await stage.restore_gauges(newly, stage.generation)
    return count
