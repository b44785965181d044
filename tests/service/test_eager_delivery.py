"""Eager delivery: Faust's fetcher hands a message to its stream through the consumer's
`wait_first(delivery, suspend_flow.wait())`. evalstream's consumer runs a delivery that does not
suspend without scheduling a task; one that does goes on under Faust's own `wait_first` and can
still be interrupted by a suspended flow. Driven on the real consumer of evalstream's app (not
started), on every supported Python (3.12 changed how `wait_for` binds to the current task)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from stream_app.service.app import create_app
from stream_app.service.faust_transport import Consumer
from stream_app.service.settings import load_settings

pytestmark = pytest.mark.pythons  # depends on the CPython version: run on each


def consumer() -> Consumer:
    """The consumer of a worker's app, made in the running loop and never started."""
    app = create_app(load_settings(broker_url="127.0.0.1:1"))
    made = app.consumer
    assert isinstance(made, Consumer)
    return made


async def test_a_delivery_that_does_not_suspend_schedules_no_task() -> None:
    delivered = []
    subject = consumer()

    async def deliver() -> None:
        delivered.append("m")

    created = []
    loop = asyncio.get_running_loop()

    def counting(loop: Any, coro: Any, **kwargs: Any) -> Any:
        created.append(coro)
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(counting)
    try:
        interrupt = subject.suspend_flow.wait()
        await subject.wait_first(deliver(), interrupt)
        assert cast(Any, interrupt).cr_frame is None  # closed, not left un-awaited
    finally:
        loop.set_task_factory(None)
    assert created == []
    assert delivered == ["m"]


async def test_a_delivery_that_suspends_finishes_with_what_it_awaited() -> None:
    log: list[Any] = []
    subject = consumer()
    room: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def deliver() -> None:
        log.append("start")
        log.append(await room)  # a full buffer: waits for room
        await asyncio.sleep(0)
        log.append("end")

    asyncio.get_running_loop().call_later(0.01, room.set_result, "room")
    await subject.wait_first(deliver(), subject.suspend_flow.wait())
    assert log == ["start", "room", "end"]


async def test_a_blocked_delivery_is_interrupted_when_the_flow_is_suspended() -> None:
    log: list[str] = []
    subject = consumer()

    async def deliver() -> None:
        try:
            await asyncio.Event().wait()  # never room
        finally:
            log.append("cancelled")

    asyncio.get_running_loop().call_later(0.01, subject.suspend_flow.set)
    await asyncio.wait_for(subject.wait_first(deliver(), subject.suspend_flow.wait()), timeout=5)
    await asyncio.sleep(0)
    assert log == ["cancelled"]


async def test_an_error_in_the_delivery_reaches_the_fetcher() -> None:
    subject = consumer()

    async def deliver() -> None:
        raise KeyError("no stream for this partition")

    with pytest.raises(KeyError, match="no stream"):
        await subject.wait_first(deliver(), subject.suspend_flow.wait())


async def test_a_delivery_timing_out_on_its_own_wait_for_leaves_the_fetcher_running() -> None:
    """Faust's delivery can wait with `asyncio.wait_for` (a full producer buffer). Since 3.12 that
    timeout cancels the task current when it started: that must be the delivery's, never the
    fetcher's, or one slow flush stops the worker's fetching."""
    subject = consumer()
    outcome: list[str] = []

    async def deliver() -> None:
        try:
            await asyncio.wait_for(asyncio.Event().wait(), timeout=0.05)
        except TimeoutError:
            outcome.append("timed out")

    async def fetcher() -> str:
        await subject.wait_first(deliver(), subject.suspend_flow.wait())
        await asyncio.sleep(0.1)  # a cancellation aimed at the fetcher would land here
        return "fetching"

    assert await asyncio.wait_for(fetcher(), timeout=5) == "fetching"
    assert outcome == ["timed out"]
