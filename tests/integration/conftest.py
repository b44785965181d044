from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import Worker, require_tansu
from stream_app.commands.broker import EmbeddedBroker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    require_tansu()
    with EmbeddedBroker(log_file=tmp_path / "broker.log") as b:
        yield b


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[Worker]]:
    """Workers a test starts; all stopped afterwards, their logs shown when the test failed."""
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()
