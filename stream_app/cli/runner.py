"""How the commands that run until stopped (tail, watch, demo, observe, worker, broker) run: an
event loop whose stop signals set an event (or cancel what runs), Python-level signal handlers
for the code outside a loop, and their logging. One way, so that Ctrl-C, `kill` and a closed
terminal stop each of them the same, and cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine, Iterable, Iterator
from types import FrameType
from typing import Any, Final, Self, TypeVar

T = TypeVar("T")
Handler = Callable[[int, FrameType | None], Any] | signal.Handlers

STOP: Final = (signal.SIGINT, signal.SIGTERM)
"""What stops a command that started no children (those add SIGHUP: `processes.stop_signals`)."""


def configure_logging(command: str) -> None:
    """Warnings, each a line headed with the command: one line per broker attempt
    (kafka_client), not aiokafka's connection errors many a second."""
    logging.basicConfig(level=logging.WARNING, format=f"{command}: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)


def configure_worker_logging(level: str) -> None:
    """One log format with the PID, so the lines of several workers can be told apart."""
    logging.basicConfig(
        level=level.upper(),
        format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s",
    )


@contextlib.contextmanager
def handling(signals: Iterable[signal.Signals], handler: Handler) -> Iterator[None]:
    """`handler` for `signals` while the block runs, outside any event loop; the previous
    handlers back after it."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class CommandLoop:
    """An event loop for a command: any of `signals` sets `stop`, and with `cancel` also cancels
    the coroutine `run` runs. Its handlers stay until `close` (or `release_signals`), so that a
    signal during the command's own clean-up after `run` does not kill it half-way."""

    def __init__(self, signals: Iterable[signal.Signals] = STOP, *, cancel: bool = False) -> None:
        self.stop = asyncio.Event()
        self._cancel = cancel
        self._task: asyncio.Task[Any] | None = None
        self._runner = asyncio.Runner()
        self.loop = self._runner.get_loop()
        self._signals = tuple(signals)
        self._previous = {sig: signal.getsignal(sig) for sig in self._signals}
        for sig in self._signals:
            self.loop.add_signal_handler(sig, self._stopped)

    def _stopped(self) -> None:
        self.stop.set()
        if self._cancel and self._task is not None:
            self._task.cancel()

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run `main` to its end (the loop can run more after it).

        Raises:
            asyncio.CancelledError: a signal cancelled it (with `cancel`).
        """
        return self._runner.run(self._tracked(main))

    async def _tracked(self, main: Coroutine[Any, Any, T]) -> T:
        self._task = asyncio.current_task()
        try:
            return await main
        finally:
            self._task = None

    def release_signals(self) -> None:
        """Hand the signals back (the loop itself stays open): to Faust, which handles them once
        it runs on this loop."""
        for sig in self._signals:
            self.loop.remove_signal_handler(sig)
        self._signals = ()
        self._restore()

    def close(self) -> None:
        """Cancel what is left, close the loop, and restore the signals' handlers."""
        self._runner.close()
        self._restore()

    def _restore(self) -> None:
        """The handlers found at the start, back: asyncio's removal leaves the default instead."""
        for sig, old in self._previous.items():
            if old is not None:  # None: a handler not set from Python, left as asyncio leaves it
                signal.signal(sig, old)
        self._previous = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def run(main: Callable[[asyncio.Event], Coroutine[Any, Any, T]]) -> T:
    """`main(stop)` on a fresh event loop, `stop` set by Ctrl-C or SIGTERM: a command that reads
    or publishes until told to stop, then ends cleanly."""
    with CommandLoop() as loop:
        return loop.run(main(loop.stop))
