"""The latency path's turns (`service/latency_path.py`): a turn waits while a batch of the path is
under way, goes once none is, and goes anyway after its patience or once its batch's budget is
spent; the suite stage takes one between two suite tiers' folds and reports. That an agent's
batch counts as the path's only on a path hop: tests/service/test_batches.py."""

from __future__ import annotations

import asyncio
import time

import pytest

from stream_app.service.latency_path import LatencyPath
from stream_app.service.outputs import Outputs
from stream_app.service.stages.suites import SuitesStage
from tests.service.test_suites_stage import CHANGELOG, message
from tests.stage_doubles import Table, records, wiring


async def spin(turns: int = 20) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_a_turn_waits_until_no_batch_of_the_path_is_under_way() -> None:
    path = LatencyPath(patience=60)
    with path.batch():
        with path.batch():
            turn = asyncio.ensure_future(path.turns(60)())
            await spin()
            assert not turn.done()
        await spin()
        assert not turn.done()  # one batch is still under way
    await asyncio.wait_for(turn, 1)
    assert path.batches == 0
    assert path.quiet.is_set()


async def test_a_turn_woken_as_the_path_starts_again_waits_on() -> None:
    """The path quiet for an instant: its next batch starts before the turn runs again."""
    path = LatencyPath(patience=60)
    with path.batch():
        turn = asyncio.ensure_future(path.turns(60)())
        await spin()
    with path.batch():  # at once, in the same step as the end of the one before
        await spin()
        assert not turn.done()
    await asyncio.wait_for(turn, 1)


async def test_a_turn_on_a_quiet_path_is_one_turn_of_the_loop() -> None:
    path, ran = LatencyPath(patience=60), []

    async def other() -> None:
        ran.append(True)

    task = asyncio.ensure_future(other())
    await path.turns(60)()  # no wrapper task of its own: the turn itself gives the loop away
    assert ran == [True]
    assert task.done()


async def test_a_turn_goes_after_its_patience_when_the_path_is_never_quiet() -> None:
    waits: list[float] = []
    path = LatencyPath(patience=0.05, waited=waits.append)
    with path.batch():
        started = time.monotonic()
        await asyncio.wait_for(path.turns(60)(), 5)
        assert 0.04 <= time.monotonic() - started < 2
    assert len(waits) == 1
    assert waits[0] >= 0.04


async def test_a_batchs_turns_wait_at_most_its_budget_in_all() -> None:
    """A backlog keeps the path busy: the suite hop's batch is slowed by its budget, no more."""
    waits: list[float] = []
    path = LatencyPath(patience=0.05, waited=waits.append)
    turn = path.turns(0.12)
    with path.batch():
        started = time.monotonic()
        for _ in range(10):
            await asyncio.wait_for(turn(), 5)
        assert 0.1 <= time.monotonic() - started < 0.45  # not 10 x 0.05 s
        assert 0.1 <= sum(waits) < 0.45
        assert len(waits) <= 4  # the turns after the budget wait for nothing


async def test_no_turn_waits_while_another_writer_waits_for_the_stage() -> None:
    """A restoration waiting for the suite stage's lock: the batch holding it hurries."""
    waits: list[float] = []
    path, queued = LatencyPath(patience=60, waited=waits.append), [1]
    with path.batch():
        await asyncio.wait_for(path.turns(60, lambda: bool(queued[0]))(), 1)
    assert waits == []


async def test_a_turn_cancelled_while_it_waits_is_cancelled() -> None:
    """A shutdown cancels the suite agent in a turn: the cancel is not lost when the path goes
    quiet in the same step."""
    path = LatencyPath(patience=60)
    with path.batch():
        turn = asyncio.ensure_future(path.turns(60)())
        await spin()
        turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert turn.cancelled()


async def test_a_failed_batch_leaves_the_path_quiet() -> None:
    path = LatencyPath()
    with pytest.raises(ValueError, match="failed"), path.batch():
        raise ValueError("the batch failed")
    assert path.batches == 0
    assert path.quiet.is_set()


async def test_a_restoration_waiting_for_the_suite_stage_hurries_its_batch() -> None:
    """While a restoration waits for the stage's lock, the batch holding it waits no more for
    the path than the turn under way: not its eight turns' patience (4 s), nor its budget."""
    config, sends, exporter, _ = wiring()
    stage = SuitesStage(Table(sends), CHANGELOG, config, Outputs(sends, config, exporter), exporter)
    path = LatencyPath(patience=0.5)
    stage.turns = path.turns
    batch = [message("a", 1, 2, tier=f"T{t}") for t in range(4)]
    with path.batch():
        handling = asyncio.ensure_future(stage.handle(records(config.topics.suite_feed, batch)))
        await spin(50)
        assert not handling.done()  # waiting for the path

        async def restoration() -> None:
            async with stage.locked():
                pass

        restoring = asyncio.ensure_future(restoration())
        started = time.monotonic()
        await asyncio.wait_for(asyncio.gather(handling, restoring), 5)
        assert time.monotonic() - started < 2.5
    assert stage.queued == 0


async def test_the_suite_stage_folds_and_reports_only_in_the_paths_gaps() -> None:
    """While a batch of the path is under way, the suite stage folds one suite tier and waits:
    the rest, and every report, come once the path is quiet."""
    config, sends, exporter, _ = wiring()
    stage = SuitesStage(Table(sends), CHANGELOG, config, Outputs(sends, config, exporter), exporter)
    path = LatencyPath(patience=60)
    stage.turns = path.turns
    topic, tiers_topic = config.topics.suite_feed, config.topics.suite_tiers
    batch = [message("a", 1, 2, tier=f"T{t}") for t in range(4)]
    with path.batch():
        handling = asyncio.ensure_future(stage.handle(records(topic, batch)))
        await spin(200)
        assert not handling.done()
        assert sends.to(tiers_topic) == []
    await asyncio.wait_for(handling, 5)
    assert len(sends.to(tiers_topic)) == 4
