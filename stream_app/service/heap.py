"""Memory the worker freed, given back to the system. glibc's allocator keeps what is freed
between blocks still in use, so a worker that went through a backlog or a recovery would keep its
peak's memory resident while it needs much less; `malloc_trim(0)` returns the free pages in those
holes (measured: docs/benchmark-history.md, 'Freed memory given back')."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache
from typing import Final

TRIM_INTERVAL_S: Final = 30.0
"""How often the worker trims its heap, on a thread of its own (`app.install_timers`)."""


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's `malloc_trim` (glibc's), or None where it has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError, TypeError):  # TypeError: Windows has no CDLL(None)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def trim_heap() -> bool:
    """Give the C heap's free pages back to the system; False where it cannot be done. The
    call releases the interpreter lock: run on a thread, it holds up only what allocates."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
