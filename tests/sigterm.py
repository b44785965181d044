"""A SIGTERM ends a test run as Ctrl-C does. By default it ends pytest at once, with no
teardown: the brokers and workers its fixtures started (each in a session of its own) would live
on. As KeyboardInterrupt, pytest stops the run and tears every fixture down."""

from __future__ import annotations

import signal
from types import FrameType

import pytest


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """At the start of the run, in the main thread (where Python runs signal handlers), over
    the default only. A command run in-process hands it back when its loop closes
    (`CommandLoop`)."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
