"""A SIGTERM ends a test run as Ctrl-C does. By default it ends pytest at once, with no
teardown: the brokers and workers its fixtures started (each in a session of its own) would live
on. As KeyboardInterrupt, pytest stops the run and tears every fixture down."""

from __future__ import annotations

import signal
from types import FrameType

import pytest


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _install() -> None:
    """Over the default only (a test's own handler is left alone)."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)


def pytest_configure(config: pytest.Config) -> None:
    """At the start of the run, in the main thread (where Python runs signal handlers)."""
    _install()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Again before each test: an event loop that handled SIGTERM in a test before (a command
    run in-process) leaves it at the default when it closes."""
    _install()
