"""An agent's loop over its stage (`batches.run_batches`) on its failure paths: whatever escapes
the stage, or the taking of batches itself, stops the worker with its batch withheld from the
commit; a batch cancelled mid-way is withheld and re-raised. Driven with a stand-in for Faust's
stream and `stop_fatally` recorded instead of exiting; the exit itself (code 70, then a restart
that loses nothing) is tests/integration/test_never_lose_a_run.py's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from faust.types import StreamT

from stream_app.service import batches
from stream_app.service.batches import Batching, run_batches
from stream_app.service.latency_path import LatencyPath
from stream_app.service.outputs import Record
from tests.stage_doubles import wiring


@dataclass
class Message:
    topic: str
    partition: int
    offset: int
    acked: bool = False


@dataclass
class Event:
    message: Message
    key: bytes | None = None
    value: bytes | None = b"{}"


class Stopped(BaseException):
    """What the recorded `stop_fatally` raises in place of the process's exit (which no
    `except Exception` of the loop can catch either)."""


@dataclass
class Stream:
    """`take_waiting` over fixed batches, then `fail` (an exception, or None: the stream ends)."""

    batches: list[list[Event]]
    fail: BaseException | None = None
    asked: list[tuple[int, float, float]] = field(default_factory=list)

    async def take_waiting(
        self, max_: int, within: float, waiting: Any, every: float = 0.0
    ) -> AsyncIterator[list[Event]]:
        self.asked.append((max_, within, every))
        for batch in self.batches:
            yield batch
        if self.fail is not None:
            raise self.fail


class Stage:
    name = "window"

    def __init__(self, fail: BaseException | None = None) -> None:
        _, _, self.exporter, self.outputs = wiring()
        self.fail = fail
        self.handled: list[list[int | None]] = []
        self.dropped = 0

    async def handle(self, batch: Sequence[Record]) -> int:
        self.handled.append([r.offset for r in batch])
        if self.fail is not None:
            raise self.fail
        return len(batch)

    def drop_cache(self) -> None:
        self.dropped += 1


def events(*offsets: int) -> list[Event]:
    return [Event(Message("runs", 0, offset)) for offset in offsets]


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, BaseException]]:
    stopped: list[tuple[str, BaseException]] = []

    def record(stage: str, exc: BaseException) -> None:
        stopped.append((stage, exc))
        raise Stopped(stage)

    monkeypatch.setattr(batches, "stop_fatally", record)
    return stopped


def run(stream: Stream, stage: Stage) -> None:
    taking = Batching(max_events=100, within_s=0.2, waiting=lambda: 0, every_s=1.0)
    coro = run_batches(cast(StreamT[bytes], stream), stage, taking, stage.exporter)
    asyncio.run(coro)


def test_batches_go_to_the_stage_with_the_batching_asked_for(
    stops: list[tuple[str, BaseException]],
) -> None:
    stream, stage = Stream([events(0, 1), events(2)]), Stage()
    run(stream, stage)
    assert stage.handled == [[0, 1], [2]]
    assert stream.asked == [(100, 0.2, 1.0)]
    assert stops == []


def test_a_batch_of_a_hop_on_the_latency_path_is_counted_there_until_confirmed(
    stops: list[tuple[str, BaseException]],
) -> None:
    """From the stage's handling to its outputs' confirmation; a hop off the path (the suite
    hop, given no path) counts nothing."""
    path = LatencyPath()
    seen: list[int] = []

    class Counted(Stage):
        async def handle(self, batch: Sequence[Record]) -> int:
            seen.append(path.batches)
            return await super().handle(batch)

    def confirmed(stage: Stage) -> None:
        confirms = stage.outputs.confirm

        async def confirm(*, states: bool = True) -> None:
            seen.append(path.batches)
            await confirms(states=states)

        stage.outputs.confirm = confirm  # type: ignore[method-assign]

    for on_path, counted in ((path, [1, 1]), (None, [0, 0])):
        seen.clear()
        stage = Counted()
        confirmed(stage)
        taking = Batching(max_events=100, within_s=0.2, waiting=lambda: 0, path=on_path)
        stream = cast(StreamT[bytes], Stream([events(0), events(1)]))
        asyncio.run(run_batches(stream, stage, taking, stage.exporter))
        assert seen == counted * 2
        assert path.batches == 0
        assert path.quiet.is_set()
    assert stops == []


def test_a_failure_to_take_batches_stops_the_worker(
    stops: list[tuple[str, BaseException]],
) -> None:
    """Faust's stream failing between batches: an agent that ended quietly would leave its hop
    stalled and the worker ready."""
    failed = RuntimeError("the stream's channel is gone")
    stream, stage = Stream([events(0)], fail=failed), Stage()
    with pytest.raises(Stopped):
        run(stream, stage)
    assert stage.handled == [[0]]
    assert stops == [("window", failed)]


def test_a_stage_failure_stops_the_worker_with_its_batch_withheld(
    stops: list[tuple[str, BaseException]],
) -> None:
    failed = ConnectionError("the producer gave up")
    batch = events(5, 6)
    stream, stage = Stream([batch, events(7)]), Stage(fail=failed)
    with pytest.raises(Stopped):
        run(stream, stage)
    assert stage.handled == [[5, 6]]  # nothing after the failed batch
    assert all(e.message.acked for e in batch)  # a later ack is a no-op: never committed
    assert stops == [("window", failed)]


def test_a_cancelled_batch_is_withheld_and_the_cancel_goes_on(
    stops: list[tuple[str, BaseException]],
) -> None:
    batch = events(3)
    stream, stage = Stream([batch]), Stage(fail=asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        run(stream, stage)
    assert batch[0].message.acked
    assert stage.dropped == 1
    assert stops == []
