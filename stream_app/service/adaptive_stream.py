"""Batches sized by the backlog: a Faust stream (given through Faust's `Stream` setting) whose
`take_waiting` takes what is waiting, up to a bound from the consumer's lag, and never waits for
a batch to fill while its input is quiet; `within` bounds only the wait for records the lag says
are on their way. Acknowledgements are Faust's `take_events`' own: a batch's events are acked
when the next batch is taken, so at-least-once and `withhold_acks` hold as before.
docs/architecture.md, 'Batches sized by the backlog'."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, cast

import faust
from faust.types import ChannelT, EventT
from mode.utils.futures import notify

Waiting = Callable[[], int]
"""Messages on their way to a stream and not yet in it (its partitions' lag, say)."""


def batch_bound(have: int, queued: int, behind: int, max_: int) -> int:
    """The size a batch should reach: everything waiting (what it has, what its channel
    queues, what is on its way), at least one, at most `max_`."""
    return max(1, min(max_, have + queued + behind))


class _Buffer:
    """A batch being filled by the stream's drainer (Faust's `take_events` processor, with a
    moving target): it wakes the batch loop once `target` events are in, and holds the drainer
    while a batch is consumed or `max_` events wait."""

    def __init__(self, stream: AdaptiveStream, max_: int) -> None:
        self.stream = stream
        self.max = max_
        self.events: list[EventT[Any]] = []
        self.target = 1
        self.full = asyncio.Event()
        self.consumed = asyncio.Event()
        self.consuming: asyncio.Future[None] | None = None

    async def add(self, value: Any) -> Any:
        """The stream's processor: every value passes here on its way to the batch."""
        stream = self.stream
        try:
            if self.consuming is not None:
                try:
                    await self.consuming
                finally:
                    self.consuming = None
            event = stream.current_event
            if event is None:
                raise RuntimeError("take buffer found current_event is None")
            self.events.append(event)
            if len(self.events) >= self.target:
                self.full.set()
            if len(self.events) >= self.max:  # never more than max_: wait until it is taken
                self.consumed.clear()
                await stream.wait(self.consumed)  # type: ignore[arg-type]
        except asyncio.CancelledError:  # pragma: no cover
            raise
        except Exception as exc:
            stream.log.exception("Error adding to take buffer: %r", exc)
            await stream.crash(exc)
        return value


class AdaptiveStream(faust.Stream[Any]):
    """Faust's stream with `take_waiting`; everything else is Faust's."""

    async def take_waiting(
        self, max_: int, within: float, waiting: Waiting, every: float = 0.0
    ) -> AsyncGenerator[Sequence[EventT[Any]], None]:
        """Yield lists of at most `max_` events: as soon as one is here and nothing more is
        waiting; else once the batch holds what was waiting, or `within` seconds after its
        first event, whichever comes first. `every`: batches start at least that many seconds
        apart, each taking what came meanwhile (for a stage whose batch costs the same
        whatever it holds)."""
        buffer = _Buffer(self, max_)
        channel_it = aiter(self.channel)
        queue = getattr(channel_it, "queue", None)

        def bound() -> int:
            queued = queue.qsize() if queue is not None else 0
            return batch_bound(len(buffer.events), queued, waiting(), max_)

        stream_enable_acks = self.enable_acks
        self.enable_acks = False  # this method acks the events, once they are consumed
        self.add_processor(buffer.add)
        self._enable_passive(cast(ChannelT[Any], channel_it))
        loop = asyncio.get_running_loop()
        last = -math.inf
        try:
            while not self.should_stop:
                if not await self._filled(buffer, bound, within):
                    continue
                pause = last + every - loop.time()
                if pause > 0:  # what arrives meanwhile joins this batch
                    await asyncio.sleep(pause)
                last = loop.time()
                buffer.consuming = loop.create_future()
                events = list(buffer.events)
                try:
                    yield events
                finally:
                    buffer.events.clear()
                    for event in events:
                        await self.ack(event)
                    notify(buffer.consuming)
                    buffer.full.clear()
                    buffer.consumed.set()
        finally:
            self.enable_acks = stream_enable_acks
            self._processors.remove(buffer.add)

    async def _filled(self, buffer: _Buffer, bound: Callable[[], int], within: float) -> bool:
        """Wait for a first event, then for the rest of what is waiting, for at most `within`
        seconds more; False when the stream stops before any event."""
        buffer.target = 1
        if not buffer.events:
            buffer.full.clear()
            await self.wait_for_stopped(buffer.full)  # type: ignore[arg-type]
            if not buffer.events:
                return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        buffer.target = bound()
        while len(buffer.events) < buffer.target and not self.should_stop:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            buffer.full.clear()  # set again by the event that reaches the target
            await self.wait_for_stopped(buffer.full, timeout=remaining)  # type: ignore[arg-type]
            buffer.target = max(buffer.target, bound())
        return True
