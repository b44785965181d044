"""A command's event loop hands the stop signals back as it found them: after `close`, and
after `release_signals`, each signal has the handler it had before (asyncio's own removal leaves
the default, which dropped whatever the caller had: a test run's SIGTERM handler, say)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType

import pytest

from stream_app.cli.runner import STOP, CommandLoop


def mine(signum: int, frame: FrameType | None) -> None:
    """A handler of the caller's own."""


@pytest.fixture
def handlers() -> Iterator[None]:
    previous = {sig: signal.getsignal(sig) for sig in STOP}
    for sig in STOP:
        signal.signal(sig, mine)
    yield
    for sig, old in previous.items():
        signal.signal(sig, old)


def test_close_restores_the_handlers_it_found(handlers: None) -> None:
    with CommandLoop() as loop:
        assert all(signal.getsignal(sig) is not mine for sig in STOP)  # the loop's, meanwhile
        loop.run(_nothing())
    assert all(signal.getsignal(sig) is mine for sig in STOP)


def test_release_signals_restores_them_too(handlers: None) -> None:
    loop = CommandLoop()
    try:
        loop.release_signals()
        assert all(signal.getsignal(sig) is mine for sig in STOP)
    finally:
        loop.close()
    assert all(signal.getsignal(sig) is mine for sig in STOP)


async def _nothing() -> None:
    return None
