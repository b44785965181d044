"""The fetch of evalstream's consumer thread reads a snapshot of the active partitions.

Faust hands its live set to a fetch that waits in the consumer thread. When the recovery paused
the changelogs mid-wait, the set emptied and aiokafka, reading an empty set as "all", drained
the paused stream partitions too; Faust dropped those records (see `faust_transport`). Here
evalstream's consumer thread, over Faust's real `_fetch_records`, runs against a stand-in for
aiokafka's fetcher that empties the live set while it waits."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any, cast

from faust.types import TP

from stream_app.service.app import create_app
from stream_app.service.faust_transport import Consumer, ConsumerThread
from stream_app.service.settings import load_settings

STREAM, CHANGELOG = TP("run-completed", 0), TP("tier-windows-changelog", 0)


class Fetcher:
    """aiokafka's fetcher as far as Faust's `_fetch_records` uses it."""

    def __init__(self, live: set[TP]) -> None:
        self._closed = False
        self._subscriptions = SimpleNamespace(fetch_context=contextlib.nullcontext)
        self.live = live
        self.calls = 0
        self.seen: list[set[TP]] = []

    async def fetched_records(self, partitions: Any, timeout: Any, max_records: Any) -> Any:
        self.calls += 1
        self.seen.append(set(partitions))
        self.live.clear()  # recovery pauses the changelog while the fetch waits
        await asyncio.sleep(0)
        self.seen.append(set(partitions))
        return {tp: ["record"] for tp in partitions}


async def fetch(active: set[TP]) -> tuple[Any, Fetcher]:
    """evalstream's consumer thread (of a worker's app, never started) fetching from `active`."""
    app = create_app(load_settings(broker_url="127.0.0.1:1"))
    thread = cast(Consumer, app.consumer)._thread
    assert isinstance(thread, ConsumerThread)
    fetcher = Fetcher(active)
    consumer = SimpleNamespace(_closed=False, _fetcher=fetcher)
    got = await thread._fetch_records(cast(Any, consumer), active, timeout=1, max_records=9)
    return got, fetcher


async def test_the_fetch_keeps_the_partitions_it_was_asked_for() -> None:
    got, fetcher = await fetch({CHANGELOG})
    assert fetcher.seen == [{CHANGELOG}, {CHANGELOG}]
    assert set(got) == {CHANGELOG}


async def test_no_active_partition_fetches_nothing() -> None:
    got, fetcher = await fetch(set())
    assert got == {}
    assert fetcher.calls == 0
