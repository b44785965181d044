"""The suite's shared fixtures (`tests/fixtures.py`), its SIGTERM handling (`tests/sigterm.py`)
and the run's one Apache Kafka broker (`tests/integration/shared_broker.py`), registered as
plugins; and the order the tests are handed out in."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["tests.fixtures", "tests.sigterm", "tests.integration.shared_broker"]

HERE = Path(__file__).parent
FIRST = (HERE / "integration",)  # long and mostly waiting: started first, the rest fill in


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The integration tests first, then the seeded simulations, then the rest, each in its
    order: pytest-xdist hands tests out one at a time (`--dist loadgroup`, scripts/
    test-suite.py; a module marked `xdist_group` goes whole to one worker, before the rest),
    so the long ones start early and the short ones even out the end."""

    def rank(item: pytest.Item) -> int:
        if any(folder in item.path.parents for folder in FIRST):
            return 0
        return 1 if item.get_closest_marker("simulation") else 2

    items.sort(key=rank)
