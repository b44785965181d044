"""Fixtures every folder of the suite can ask for: the in-memory chain of the worker's stages,
a stage's wiring to a list of sends, and the sample of real runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stream_app.service.settings import Settings
from tests.chain import Chain
from tests.helpers import SAMPLE_FILE
from tests.stage_doubles import Wiring, wiring


@pytest.fixture
def sample_lines() -> list[bytes]:
    """The bundled sample of real runs (three experiments), one event a line."""
    return SAMPLE_FILE.read_bytes().splitlines()


@pytest.fixture
def stage_wiring() -> Callable[..., Wiring]:
    """Settings (4 partitions, `**overrides`), a list for the sends, the exporter and the
    stage's `Outputs` over them."""
    return wiring


@pytest.fixture
def make_chain() -> Callable[..., Chain]:
    """A new in-memory chain of the worker's stages for `settings` (`Chain`'s options)."""

    def make(settings: Settings, **options: Any) -> Chain:
        return Chain(settings, **options)

    return make
