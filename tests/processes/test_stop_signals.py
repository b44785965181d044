"""Which signals stop the commands that start children (demo, observe): a closed terminal does,
unless the command was started to outlive it (`nohup` ignores SIGHUP)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from stream_app.processes import stop_signals


@pytest.fixture
def hangup() -> Iterator[None]:
    previous = signal.getsignal(signal.SIGHUP)
    yield
    signal.signal(signal.SIGHUP, previous)


def test_a_closed_terminal_stops_them(hangup: None) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    assert stop_signals() == (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def test_under_nohup_they_outlive_the_terminal(hangup: None) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    assert stop_signals() == (signal.SIGINT, signal.SIGTERM)
