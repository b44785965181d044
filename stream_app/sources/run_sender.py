"""Runs sent to the input topic from inside someone else's program (the inspect_ai hook) without
ever slowing or failing it. `offer` only puts a run on a bounded queue; a thread of its own, with
its own event loop, sends what the queue holds (acks=all), each run held `hold_s` so that runs
handed over out of order go out in their own order (their completion). What cannot be sent (no
broker within `connect_timeout_s`, a send that fails or times out, a full queue, runs left at
`close`) is appended to a spool file (JSON lines, fsynced) that `stream-app produce` sends later;
a spooled run that had reached the broker is sent twice, and the worker drops it by its `run_id`.
Nothing is lost silently: `close` says what was sent, and what was spooled where."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from aiokafka import AIOKafkaProducer

from stream_app.service.kafka_client import client_kwargs
from stream_app.service.settings import Settings

log = logging.getLogger(__name__)

CAPACITY: Final = 10_000
"""Runs the queue holds before `offer` spools instead (an eval far ahead of its broker)."""
HOLD_S: Final = 2.0
"""How long a run waits for runs that completed before it but were handed over after it."""
_TICK_S: Final = 0.1
_CLOSE: Final = object()

Order = tuple[Any, ...]
"""What runs go out in the order of (for the hook: completed_at, run_id)."""
Item = tuple[Order, float, bytes, bytes | None]
"""A run held: its order, when it was handed over (monotonic), its value and key."""


@dataclass(frozen=True)
class Sent:
    """What a sender did: runs acknowledged by the broker, runs spooled, and where."""

    sent: int
    spooled: int
    spool: Path
    lost: int = 0
    """Runs that could be neither sent nor spooled (the spool not writable): said, never silent."""


class RunSender:
    """A bounded queue of runs and the thread that sends them (started by the first run)."""

    def __init__(
        self,
        settings: Settings,
        spool: Path,
        *,
        capacity: int = CAPACITY,
        connect_timeout_s: float = 5.0,
        send_timeout_s: float = 15.0,
        hold_s: float = HOLD_S,
    ) -> None:
        self.settings = settings
        self.spool = spool
        self.queue: queue.Queue[Item | object] = queue.Queue(capacity)
        self.hold_s = hold_s
        self.held: list[Item] = []
        """Runs handed over and not yet ripe, a heap by their order (under `holding`)."""
        self.holding = threading.Lock()
        self.connect_timeout_s = connect_timeout_s
        self.send_timeout_s = send_timeout_s
        self.sent = self.spooled = self.lost = 0
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def offer(self, value: bytes, key: bytes | None, order: Order) -> None:
        """Hand a run over, at once: to the queue, or to the spool when the queue is full."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="evalstream-sender", daemon=True)
            self.thread.start()
        try:
            self.queue.put_nowait((order, time.monotonic(), value, key))
        except queue.Full:
            self._spool([value])

    def close(self, timeout_s: float = 30.0) -> Sent:
        """Send what is queued and held, for at most `timeout_s` (more than a connection and a
        send take), then spool whatever is left."""
        if self.thread is not None:
            with contextlib.suppress(queue.Full):
                self.queue.put(_CLOSE, timeout=timeout_s)
            self.thread.join(timeout_s)
        with self.holding:
            left, self.held = self.held, []
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, tuple):
                left.append(item)
        self._spool([value for _, _, value, _ in sorted(left)])
        return Sent(self.sent, self.spooled, self.spool, self.lost)

    def _spool(self, values: list[bytes]) -> None:
        if not values:
            return
        with self.lock:
            try:
                self.spool.parent.mkdir(parents=True, exist_ok=True)
                with self.spool.open("ab") as file:
                    file.write(b"".join(v + b"\n" for v in values))
                    file.flush()
                    os.fsync(file.fileno())
            except OSError as exc:
                self.lost += len(values)
                log.error(
                    "evalstream: %d runs lost: cannot write %s (%s)", len(values), self.spool, exc
                )
                return
            self.spooled += len(values)

    def _run(self) -> None:
        asyncio.run(self._send_all())

    async def _send_all(self) -> None:
        producer: AIOKafkaProducer | None = AIOKafkaProducer(
            **client_kwargs(self.settings), acks="all", linger_ms=5
        )
        assert producer is not None
        try:
            await asyncio.wait_for(producer.start(), self.connect_timeout_s)
        except Exception as exc:
            log.warning(
                "evalstream: no broker (%s): runs go to %s", exc or type(exc).__name__, self.spool
            )
            await _stop(producer)
            producer = None
        try:
            while True:
                batch, closing = await asyncio.to_thread(self._take)
                if batch and producer is not None and not await self._send(producer, batch):
                    await _stop(producer)
                    producer = None
                if batch and producer is None:
                    self._spool([value for _, _, value, _ in batch])
                if closing:
                    return
        finally:
            if producer is not None:
                await _stop(producer)

    def _take(self) -> tuple[list[Item], bool]:
        """The runs ripe to go, in their order, and whether `close` came (then all of them):
        once a run has been held `hold_s`, it and every held run ordered before it go."""
        closing = False
        deadline = time.monotonic() + _TICK_S
        while not closing:
            try:
                item = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if isinstance(item, tuple):
                with self.holding:
                    heapq.heappush(self.held, item)
            else:
                closing = True
        with self.holding:
            if closing:
                everything, self.held = sorted(self.held), []
                return everything, True
            now = time.monotonic()
            due = [item[0] for item in self.held if now - item[1] >= self.hold_s]
            ripe: list[Item] = []
            if due:
                last = max(due)
                while self.held and self.held[0][0] <= last:
                    ripe.append(heapq.heappop(self.held))
            return ripe, False

    async def _send(self, producer: AIOKafkaProducer, batch: list[Item]) -> bool:
        """Send a batch and wait for its acknowledgements; False (it is spooled) on failure."""
        topic = self.settings.topics.input
        try:
            futures = [await producer.send(topic, value=v, key=k) for _, _, v, k in batch]
            await asyncio.wait_for(asyncio.gather(*futures), self.send_timeout_s)
        except Exception as exc:
            log.warning(
                "evalstream: sending failed (%s): runs go to %s",
                exc or type(exc).__name__,
                self.spool,
            )
            return False
        self.sent += len(batch)
        return True


async def _stop(producer: AIOKafkaProducer) -> None:
    """Stop it within 5 s; one that cannot is dropped anyway."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(producer.stop(), 5.0)
