"""Eager delivery: Faust's fetcher hands a message to its stream through the consumer's
`wait_first(delivery, suspend_flow.wait())`. Patched, a delivery that does not suspend runs
without a task; one that does goes on under Faust's own `wait_first` and can still be
interrupted by a suspended flow."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from faust.transport.consumer import Consumer
from mode.utils.locks import Event

from stream_app.service.kafka_compat import install_eager_delivery


def consumer() -> Any:
    return SimpleNamespace(
        suspend_flow=Event(),
        should_stop=False,
        _stopped=Event(),
        _crashed=Event(),
        loop=asyncio.get_running_loop(),
    )


def test_a_delivery_that_does_not_suspend_creates_no_task() -> None:
    install_eager_delivery()
    delivered = []

    async def deliver() -> None:
        delivered.append("m")

    async def scenario() -> int:
        fake = consumer()
        created = []
        loop = asyncio.get_running_loop()

        def counting(loop: Any, coro: Any, **kwargs: Any) -> Any:
            created.append(coro)
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(counting)
        interrupt = fake.suspend_flow.wait()
        await Consumer.wait_first(fake, deliver(), interrupt)
        assert interrupt.cr_frame is None  # closed, not left un-awaited
        return len(created)

    assert asyncio.run(scenario()) == 0
    assert delivered == ["m"]


def test_a_delivery_that_suspends_finishes_with_what_it_awaited() -> None:
    install_eager_delivery()
    log: list[Any] = []

    async def scenario() -> None:
        fake = consumer()
        room: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def deliver() -> None:
            log.append("start")
            log.append(await room)  # a full buffer: waits for room
            await asyncio.sleep(0)
            log.append("end")

        asyncio.get_running_loop().call_later(0.01, room.set_result, "room")
        await Consumer.wait_first(fake, deliver(), fake.suspend_flow.wait())

    asyncio.run(scenario())
    assert log == ["start", "room", "end"]


def test_a_blocked_delivery_is_interrupted_when_the_flow_is_suspended() -> None:
    install_eager_delivery()
    log: list[str] = []

    async def scenario() -> None:
        fake = consumer()

        async def deliver() -> None:
            try:
                await asyncio.Event().wait()  # never room
            finally:
                log.append("cancelled")

        asyncio.get_running_loop().call_later(0.01, fake.suspend_flow.set)
        await asyncio.wait_for(
            Consumer.wait_first(fake, deliver(), fake.suspend_flow.wait()), timeout=5
        )
        await asyncio.sleep(0)

    asyncio.run(scenario())
    assert log == ["cancelled"]


def test_an_error_in_the_delivery_reaches_the_fetcher() -> None:
    install_eager_delivery()

    async def deliver() -> None:
        raise KeyError("no stream for this partition")

    async def scenario() -> None:
        fake = consumer()
        await Consumer.wait_first(fake, deliver(), fake.suspend_flow.wait())

    with pytest.raises(KeyError, match="no stream"):
        asyncio.run(scenario())
