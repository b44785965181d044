"""A recovered stage's gauges are restored once the rebalance has settled (`Worker.restore_gauges`):
not while Faust's recovery still seeks the stream partitions, which a restoration's seconds of
CPU would hold up, and the worker's readiness with them; and its turns leave the loop idle."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from stream_app.service.app import Worker
from stream_app.service.settings import load_settings
from stream_app.service.stages.table_stage import Pauses

SETTINGS = load_settings(broker_url="127.0.0.1:1", app_id="restoration")


class Stage:
    """A stage that records when its restoration runs."""

    table_name = "tier-windows"

    def __init__(self) -> None:
        self.restored: list[tuple[set[int], int]] = []

    async def restore_gauges(self, partitions: set[int], generation: int) -> int:
        self.restored.append((partitions, generation))
        return 0


async def test_a_restoration_waits_for_the_rebalance_to_settle() -> None:
    worker = Worker(SETTINGS)
    stage: Any = Stage()
    worker.app.on_rebalance_start()
    task = asyncio.ensure_future(worker.restore_gauges(stage, {1, 2}, 3))
    await asyncio.sleep(0.05)
    assert stage.restored == []  # the recovery has not sought the stream partitions yet
    worker.app.on_rebalance_end()
    await asyncio.wait_for(task, 5)
    assert stage.restored == [({1, 2}, 3)]


async def test_the_next_rebalance_holds_the_restorations_it_makes_again() -> None:
    worker = Worker(SETTINGS)
    stage: Any = Stage()
    worker.app.on_rebalance_start()
    worker.app.on_rebalance_end()
    await asyncio.wait_for(worker.restore_gauges(stage, {0}, 1), 5)
    worker.app.on_rebalance_start()
    task = asyncio.ensure_future(worker.restore_gauges(stage, {4}, 2))
    await asyncio.sleep(0.05)
    assert stage.restored == [({0}, 1)]
    worker.app.on_rebalance_end()
    await asyncio.wait_for(task, 5)
    assert stage.restored == [({0}, 1), ({4}, 2)]


async def test_a_restoration_s_turns_leave_the_loop_idle_for_their_rest() -> None:
    """Each turn lasts `rest_s` at least: the loop then waits in its selector, without the
    interpreter lock, and the consumer thread runs (docs/benchmark-history.md, 'Gauges after
    the rebalance')."""
    took = []
    for rest_s in (0.02, 0.0):
        pause = Pauses(0.0, lambda: True, rest_s)
        started = time.monotonic()
        for _ in range(5):
            await pause()
        took.append(time.monotonic() - started)
    rested, quick = took
    assert rested >= 5 * 0.02 > quick
