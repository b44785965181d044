"""How an agent runs a stage: take a batch, hand it to the stage, time it; and what happens when
a batch fails for a reason that is no event's fault (the worker stops before it is committed)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from faust.types import EventT, StreamT
from faust.types.tuples import ack_lock

from stream_app.core.ingest import error_text
from stream_app.exit_codes import FATAL
from stream_app.service.adaptive_stream import AdaptiveStream, Waiting
from stream_app.service.exporter import Exporter
from stream_app.service.latency_path import LatencyPath
from stream_app.service.outputs import Outputs, Record

log = logging.getLogger(__name__)


class Stage(Protocol):
    """One hop of the worker: a name (its metrics label), a batch handler and its cache."""

    @property
    def name(self) -> str:
        """The stage's label in metrics and logs."""

    @property
    def outputs(self) -> Outputs:
        """Where it publishes: one `Outputs` per stage, whose unconfirmed sends are its own."""

    async def handle(self, batch: Sequence[Record]) -> int:
        """Process one batch; every event's own problem is handled (dead-lettered) inside.
        Returns the number of events it held (a bundle of runs counts its runs)."""

    def drop_cache(self) -> None:
        """Forget decoded state that may be ahead of the table."""


def stop_fatally(stage: str, exc: BaseException) -> None:
    """Stop the process at once, before any offset of the failed batch can be committed: a
    restart redelivers the batch. For errors that are no event's fault (a send the producer
    gave up on, a defect in the shell); an event's own problem is its dead letter instead."""
    log.critical(
        "evalstream: stopping: the %s stage failed on an error that is no single event's fault "
        "(%s); its batch is not committed and is redelivered after a restart",
        stage,
        error_text(exc),
        exc_info=exc,
    )
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(FATAL)


def withhold_acks(events: Sequence[EventT[bytes]]) -> None:
    """Keep a batch's offsets from ever being committed by this process.

    Faust's `take_events` acks every event of a batch when the batch's loop exits, also when
    the batch failed or was cancelled mid-way, and the next commit would then skip events whose
    outputs were never written. Marking the messages acked *without* telling the consumer makes
    that late ack a no-op: the consumer never counts their offsets as done, so it commits nothing
    at or past them (commits advance over contiguous acked offsets only), and Faust's wait for
    unacked messages at shutdown does not wait for them either. The next worker to own the
    partition reads them again. Under Faust's `ack_lock`, as every ack is."""
    with ack_lock:
        for event in events:
            event.message.acked = True


def records_of(events: Sequence[EventT[bytes]]) -> list[Record]:
    """The stage's view of Faust's events: position, key and bytes."""
    out = []
    for event in events:
        message = event.message
        value = event.value if event.value is not None else b""
        out.append(Record(message.topic, message.partition, message.offset, event.key, value))
    return out


@dataclass(frozen=True)
class Batching:
    """How an agent takes its batches (`AdaptiveStream.take_waiting`): at most `max_events`
    records, waiting at most `within_s` for those the lag (`waiting`) says are on their way;
    batches at least `every_s` apart."""

    max_events: int
    within_s: float
    waiting: Waiting
    every_s: float = 0.0
    path: LatencyPath | None = None
    """The latency path, when this hop is on it: its batches count as the path's."""


async def run_batches(
    stream: StreamT[bytes], stage: Stage, batching: Batching, exporter: Exporter
) -> None:
    """An agent's loop over `stage`. Whatever escapes `handle`, or the taking of batches, is no
    event's fault and stops the worker before the batch is committed; a batch cancelled mid-way
    (shutdown) is withheld from the commit, so it is redelivered: the parts of it already
    confirmed (`WindowsStage.handle_batch`) hold its runs, which come back as repeats."""
    histogram = exporter.processing.labels(stage=stage.name)
    sizes = exporter.batch_size.labels(stage=stage.name)
    events: Sequence[EventT[bytes]]
    path = batching.path
    batches = cast(AdaptiveStream, stream).take_waiting(
        batching.max_events, batching.within_s, batching.waiting, batching.every_s
    )
    try:
        async for events in batches:
            started = time.perf_counter()
            try:
                with path.batch() if path is not None else contextlib.nullcontext():
                    handled = await stage.handle(records_of(events))
                    await stage.outputs.confirm()  # a refused record fails the batch, uncommitted
            except asyncio.CancelledError:
                withhold_acks(events)
                stage.drop_cache()
                log.warning(
                    "%s: a batch of %d events was cancelled mid-way; withheld from the commit",
                    stage.name,
                    len(events),
                )
                raise
            except Exception as exc:
                withhold_acks(events)
                stop_fatally(stage.name, exc)
            sizes.observe(len(events))
            per_event = (time.perf_counter() - started) / max(handled, 1)
            for _ in range(handled):  # the batch's time spread over its events
                histogram.observe(per_event)
    except Exception as exc:  # the batching itself failed (the lag, Faust's stream): no event's
        stop_fatally(stage.name, exc)  # fault, and an agent that died quietly would stall its hop
