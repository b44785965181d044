"""The hops a run's produce-to-aggregate latency waits on, and the turns of the event loop a hop
off that path takes. The suite hop's reports cost milliseconds each, many a batch; given a turn
of the loop between two of them, each await of a path batch (its sends' acknowledgements, its
writes) could wait behind one. A turn here waits until no batch of the path is under way, so
reports fill the gaps between the path's batches; each turn at most `patience`, and the turns of
one suite batch at most a budget in all, after which they are plain turns: a path that is never
quiet (a backlog) slows the suite hop by that much, never stops it (docs/architecture.md, 'The
latency path first')."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

PATIENCE_S: Final = 0.1
"""How long one turn waits for the latency path to be quiet before it goes anyway."""

Turn = Callable[[], Awaitable[None]]
"""A pause between two pieces of a batch's work, for the other hops."""


class LatencyPath:
    """Counts the path's batches under way; `turns` are the suite hop's pauses."""

    def __init__(
        self, patience: float = PATIENCE_S, waited: Callable[[float], None] | None = None
    ) -> None:
        self.patience = patience
        self.waited = waited
        """Told the seconds of each turn's wait (the worker's counter)."""
        self.batches = 0
        """Batches of the path's hops under way."""
        self.quiet = asyncio.Event()
        """Set while no batch of the path is under way."""
        self.quiet.set()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One batch of a hop on the path, from its handling to its outputs' confirmation."""
        self.batches += 1
        self.quiet.clear()
        try:
            yield
        finally:
            self.batches -= 1
            if not self.batches:
                self.quiet.set()

    def turns(self, budget: float, hurry: Callable[[], bool] = lambda: False) -> Turn:
        """The turns of one batch off the path: each waits until the path is quiet, at most
        `patience`, and all of them together at most `budget` seconds; none waits while
        `hurry` says another writer waits for the batch's stage (a restoration)."""
        left = budget

        async def turn() -> None:
            nonlocal left
            await asyncio.sleep(0)  # first: the path checked last, nothing awaited after it
            loop = asyncio.get_running_loop()
            started = loop.time()
            end = started + min(self.patience, left)
            waits = False
            # the path may start its next batch before this task runs again: look again
            while not self.quiet.is_set() and not hurry() and (remaining := end - loop.time()) > 0:
                waits = True
                # `timeout`, not `wait_for`: no task per turn, and a cancellation (shutdown) that
                # comes as the path goes quiet is not lost (3.11's `wait_for` may drop it)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self.quiet.wait()
            if waits:
                waited = loop.time() - started
                left -= waited
                if self.waited is not None:
                    self.waited(waited)

        return turn


def plain_turns(budget: float, hurry: Callable[[], bool]) -> Turn:
    """Plain turns of the loop: a stage's pauses where no path is given (the stage tests)."""
    return next_turn


async def next_turn() -> None:
    """One turn of the loop for the others."""
    await asyncio.sleep(0)
