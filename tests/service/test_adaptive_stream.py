"""Batches that take what is waiting: one event of a quiet stream goes at once, whatever
`within` says; a backlog's batch waits for what the lag says is coming, up to its bound and
`within`; a batch never holds more than `max_`. Driven with a stand-in for Faust's stream (the
drainer's side is `_Buffer.add`, as the stream's processor), so no broker is needed; the
worker's use of it on Apache Kafka is in tests/integration/test_adaptive_batches.py. Also the lag
a batch waits for (`app.lag_of`), from a stand-in consumer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from stream_app.service.adaptive_stream import AdaptiveStream, _Buffer, batch_bound
from stream_app.service.app import lag_of

FOREVER = 3600.0  # a `within` no test may wait for


class FakeStream:
    """What `_Buffer` and `_filled` use of a Faust stream."""

    def __init__(self) -> None:
        self.should_stop = False
        self.current_event: Any = None

    async def wait(self, event: asyncio.Event) -> None:
        await event.wait()

    async def wait_for_stopped(self, event: asyncio.Event, timeout: float | None = None) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
        return self.should_stop

    async def crash(self, exc: BaseException) -> None:
        raise AssertionError(f"the drainer crashed: {exc!r}")


async def deliver(stream: FakeStream, buffer: _Buffer, values: list[int]) -> None:
    """The drainer: each value becomes the current event and passes the processor."""
    for value in values:
        stream.current_event = value
        await buffer.add(value)


def filled(stream: FakeStream, buffer: _Buffer, bound: Callable[[], int], within: float) -> Any:
    return AdaptiveStream._filled(cast(AdaptiveStream, stream), buffer, bound, within)


def held(buffer: _Buffer) -> list[object]:
    """The batch so far (the fake drainer's events are the values themselves)."""
    return list(buffer.events)


def bound_of(buffer: _Buffer, behind: list[int], max_: int) -> Callable[[], int]:
    return lambda: batch_bound(len(buffer.events), 0, behind[0], max_)


def test_the_bound_is_what_waits_at_least_one_at_most_the_cap() -> None:
    assert batch_bound(have=1, queued=0, behind=0, max_=100) == 1
    assert batch_bound(have=0, queued=0, behind=0, max_=100) == 1
    assert batch_bound(have=3, queued=4, behind=5, max_=100) == 12
    assert batch_bound(have=3, queued=4, behind=50_000, max_=100) == 100


async def test_a_quiet_streams_event_goes_at_once_whatever_within_says() -> None:
    stream = FakeStream()
    buffer = _Buffer(cast(AdaptiveStream, stream), 100)
    behind = [0]
    waiter = asyncio.ensure_future(filled(stream, buffer, bound_of(buffer, behind, 100), FOREVER))
    await asyncio.sleep(0)
    await deliver(stream, buffer, [1])
    assert await asyncio.wait_for(waiter, timeout=5) is True
    assert held(buffer) == [1]


async def test_a_backlogs_batch_waits_for_what_the_lag_says_is_coming() -> None:
    stream = FakeStream()
    buffer = _Buffer(cast(AdaptiveStream, stream), 100)
    behind = [4]  # four more on their way once the first is here
    await deliver(stream, buffer, [1])
    waiter = asyncio.ensure_future(filled(stream, buffer, bound_of(buffer, behind, 100), FOREVER))
    for value in (2, 3, 4, 5):
        await asyncio.sleep(0.01)
        assert not waiter.done(), "the batch went before what the lag announced came"
        behind[0] -= 1
        await deliver(stream, buffer, [value])
    assert await asyncio.wait_for(waiter, timeout=5) is True
    assert held(buffer) == [1, 2, 3, 4, 5]


async def test_within_bounds_the_wait_for_what_never_comes() -> None:
    stream = FakeStream()
    buffer = _Buffer(cast(AdaptiveStream, stream), 100)
    await deliver(stream, buffer, [1])
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await filled(stream, buffer, bound_of(buffer, [50], 100), 0.05) is True
    assert loop.time() - started >= 0.05
    assert held(buffer) == [1]


async def test_a_batch_never_holds_more_than_its_cap() -> None:
    stream = FakeStream()
    buffer = _Buffer(cast(AdaptiveStream, stream), 3)
    drainer = asyncio.ensure_future(deliver(stream, buffer, [1, 2, 3, 4, 5]))
    await asyncio.sleep(0.01)
    assert held(buffer) == [1, 2, 3]
    assert not drainer.done(), "the drainer went on past the cap"
    assert await filled(stream, buffer, bound_of(buffer, [2], 3), FOREVER) is True
    buffer.events.clear()  # what `take_waiting` does once the batch is consumed
    buffer.consumed.set()
    await asyncio.wait_for(drainer, timeout=5)
    assert held(buffer) == [4, 5]


async def test_a_stopping_stream_yields_no_empty_batch() -> None:
    stream = FakeStream()
    buffer = _Buffer(cast(AdaptiveStream, stream), 10)
    waiter = asyncio.ensure_future(filled(stream, buffer, bound_of(buffer, [0], 10), FOREVER))
    await asyncio.sleep(0)
    stream.should_stop = True
    buffer.full.set()  # what a stopping service's wait returns on
    assert await asyncio.wait_for(waiter, timeout=5) is False


@pytest.mark.parametrize("max_", [1, 7])
async def test_every_value_reaches_a_batch_once_in_order(max_: int) -> None:
    stream = FakeStream()
    buffer = _Buffer(cast(AdaptiveStream, stream), max_)
    values = list(range(25))
    drainer = asyncio.ensure_future(deliver(stream, buffer, values))
    batches: list[list[object]] = []
    while sum(map(len, batches)) < len(values):
        behind = [len(values) - sum(map(len, batches)) - len(buffer.events)]
        assert await filled(stream, buffer, bound_of(buffer, behind, max_), 0.5) is True
        batches.append(held(buffer))
        buffer.events.clear()
        buffer.full.clear()
        buffer.consumed.set()
    await asyncio.wait_for(drainer, timeout=5)
    assert [v for b in batches for v in b] == values
    assert all(0 < len(b) <= max_ for b in batches)


class Lags:
    """A consumer's `lag`: per topic, partition → messages behind; `None`: reading it fails, as
    aiokafka's assertion does for a partition the consumer thread has just unassigned."""

    def __init__(self, lags: dict[str, int] | None) -> None:
        self.lags = lags

    def lag(self, topics: set[str]) -> dict[tuple[str, int], int]:
        if self.lags is None:
            raise AssertionError("Partition is not assigned")
        return {(t, 0): n for t, n in self.lags.items() if t in topics}


def waiting_with(lags: dict[str, int] | None) -> int:
    app = SimpleNamespace(consumer=Lags(lags))
    return lag_of(cast(Any, app), "runs", {"input"}, backlog=100)()


def test_what_waits_is_the_own_lag_and_a_backlog_while_the_hops_before_are_behind() -> None:
    assert waiting_with({"runs": 7, "input": 100}) == 7
    assert waiting_with({"runs": 7, "input": 101}) == 107


def test_a_lag_that_cannot_be_read_waits_for_nothing_rather_than_stopping_the_worker() -> None:
    assert waiting_with(None) == 0
