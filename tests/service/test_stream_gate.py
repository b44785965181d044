"""After a rebalance the stream partitions stay paused until they are sought to their committed
offsets and the streams' queues are cleared (`faust_transport.StreamGate`).

Faust resumes them before its seek and clears the queues after it: records fetched in between
ran the fetcher's read offset ahead of what the agents were given, and the records it skipped
were dropped when they came again (or committed over as a gap). The chaos test that cuts the
broker connection until the group drops the worker lost runs that way. No broker here: the
consumer is evalstream's own, driven through Faust's rebalance order by hand."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import pytest
from faust.tables.recovery import Recovery
from faust.types import TP

from stream_app.service.app import create_app
from stream_app.service.faust_transport import Consumer, StreamGate
from stream_app.service.settings import load_settings

STREAM = TP("run-completed", 0)
BUNDLES = TP("evalstream-runs-by-tier", 0)
CHANGELOG = TP("evalstream-tier-windows-changelog", 0)
ASSIGNED = {STREAM, BUNDLES, CHANGELOG}
COMMITTED: dict[TP, int | None] = {STREAM: 497, BUNDLES: 9, CHANGELOG: None}


@pytest.mark.parametrize("method", [Recovery.on_recovery_completed, Recovery._resume_streams])
def test_faust_resumes_the_streams_before_its_seek_and_clears_their_queues_after(
    method: Any,
) -> None:
    """The order the gate is written against: resume, seek, clear the queues, resume the flow."""
    source = inspect.getsource(method)
    steps = [
        "consumer.resume_partitions(",
        "consumer.perform_seek()",
        "flow_control.resume()",
        "consumer.resume_flow()",
    ]
    positions = [source.index(step) for step in steps]
    assert positions == sorted(positions), dict(zip(steps, positions, strict=True))


class Rebalance:
    """evalstream's consumer, its broker calls replaced: what is active (fetched) when."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        app = create_app(load_settings(broker_url="127.0.0.1:1"))
        consumer = app.consumer
        assert isinstance(consumer, Consumer)
        self.app, self.consumer = app, consumer
        self.active_at_seek: set[TP] | None = None

        async def app_assigned(assigned: set[TP], generation_id: int = 0) -> None:
            consumer.pause_partitions(assigned)  # what Faust's app does first

        async def seek_to_committed() -> Mapping[TP, int | None]:
            self.active_at_seek = self.active()
            return COMMITTED

        monkeypatch.setattr(consumer, "_on_partitions_assigned", app_assigned)
        monkeypatch.setattr(consumer, "seek_to_committed", seek_to_committed)
        monkeypatch.setattr(consumer, "assignment", lambda: set(ASSIGNED))
        monkeypatch.setattr(app.tables, "_changelogs", {CHANGELOG.topic: object()})

    def active(self) -> set[TP]:
        """The partitions the fetcher asks the broker for (Faust's live set)."""
        return set(self.consumer._get_active_partitions())

    async def assign(self) -> None:
        """An assignment, then the tables' recovery: their changelogs resumed, the flow too."""
        await self.consumer.on_partitions_assigned(set(ASSIGNED), 3)
        self.consumer.resume_partitions({CHANGELOG})
        self.app.flow_control.resume()
        self.consumer.resume_flow()

    async def recovery_completed(self) -> None:
        """`Recovery.on_recovery_completed` from its resume on, as Faust orders it."""
        self.consumer.resume_partitions({STREAM, BUNDLES})
        await self.consumer.perform_seek()
        self.app.flow_control.resume()
        self.consumer.resume_flow()


async def test_stream_partitions_are_fetched_only_once_sought_and_their_queues_cleared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rebalance = Rebalance(monkeypatch)
    consumer = rebalance.consumer
    await rebalance.assign()
    assert rebalance.active() == {CHANGELOG}
    consumer.resume_partitions({STREAM, BUNDLES})  # Faust, before its seek
    assert rebalance.active() == {CHANGELOG}, "a stream partition fetched before its seek"
    await consumer.perform_seek()
    assert rebalance.active_at_seek == {CHANGELOG}
    assert consumer._read_offset[STREAM] == 497  # read offsets are the committed ones
    assert rebalance.active() == {CHANGELOG}, "fetched before the queues were cleared"
    rebalance.app.flow_control.resume()
    consumer.resume_flow()
    assert rebalance.active() == set(ASSIGNED)


async def test_a_seek_before_the_streams_are_resumed_does_not_let_them_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Faust's fetcher seeks by itself when it gets records while the flow is stopped (during a
    recovery, say): that seek comes before the resume, so the gate waits for the next one."""
    rebalance = Rebalance(monkeypatch)
    consumer = rebalance.consumer
    await consumer.on_partitions_assigned(set(ASSIGNED), 3)
    await consumer.perform_seek()  # the fetcher's, with the flow stopped
    consumer.resume_partitions({CHANGELOG})
    consumer.resume_flow()  # the recovery's, for the changelogs
    assert rebalance.active() == {CHANGELOG}
    consumer.resume_partitions({STREAM, BUNDLES})
    consumer.resume_flow()  # no seek since the resume: still held
    assert rebalance.active() == {CHANGELOG}
    await rebalance.recovery_completed()
    assert rebalance.active() == set(ASSIGNED)


async def test_a_partition_whose_buffer_drains_while_held_stays_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rebalance = Rebalance(monkeypatch)
    consumer = rebalance.consumer
    await rebalance.assign()
    consumer._buffered_partitions.add(STREAM)  # it was full when the rebalance came
    consumer.resume_partitions({STREAM, BUNDLES})
    consumer.on_buffer_drop(STREAM)  # Faust would make it active again here
    assert rebalance.active() == {CHANGELOG}
    await consumer.perform_seek()
    rebalance.app.flow_control.resume()
    consumer.resume_flow()
    assert rebalance.active() == set(ASSIGNED)


async def test_after_the_release_the_consumer_is_faust_s_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pauses and resumes between rebalances (full buffers) pass through the open gate."""
    rebalance = Rebalance(monkeypatch)
    consumer = rebalance.consumer
    await rebalance.assign()
    await rebalance.recovery_completed()
    consumer.pause_partitions({STREAM})
    assert STREAM not in rebalance.active()
    consumer.resume_partitions({STREAM})
    assert rebalance.active() == set(ASSIGNED)


def test_the_gate_lets_through_only_after_a_seek_that_follows_the_hold() -> None:
    gate = StreamGate()
    assert gate.hold({STREAM}, {CHANGELOG.topic}) == {STREAM}  # open: Faust's own behaviour
    gate.assigned()
    assert gate.hold({STREAM, CHANGELOG}, {CHANGELOG.topic}) == {CHANGELOG}
    assert gate.release() == set()  # not sought yet
    gate.seek_done()
    assert gate.hold({BUNDLES}, {CHANGELOG.topic}) == set()  # held after the seek: wait again
    assert gate.release() == set()
    gate.seek_done()
    assert gate.release() == {STREAM, BUNDLES}
    assert gate.hold({STREAM}, {CHANGELOG.topic}) == {STREAM}
    gate.assigned()  # a new rebalance forgets what the last one held
    assert gate.held == set()
