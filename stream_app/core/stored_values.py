"""Checks of the numbers and names in a stored state or an internal message, shared by every
loader of the core: a state that no run makes is refused when it is loaded, never later."""

from __future__ import annotations

from typing import Any

from stream_app.core.compact_json import dumps


def is_integer(value: Any) -> bool:
    """An int that is not a bool (JSON's true and false are not numbers here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_count(value: Any, most: int) -> bool:
    """An integer from 0 to `most`."""
    return is_integer(value) and 0 <= value <= most


def name_bytes(name: str) -> int:
    """What a name takes stored, as JSON in UTF-8."""
    return len(dumps(name))
