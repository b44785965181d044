"""The suite tier's window: the 14 days up to the suite's clock, and the day after it. The clock
is the newest hour of the experiment second most recent, so that no single experiment's clock
(a run dated years ahead, say) moves the window away from the others'."""

from __future__ import annotations

from typing import Final

HOUR_US: Final = 3_600_000_000
WINDOW_DAYS: Final = 14
"""The detectors' window: change points in each of the last 14 days."""
WINDOW_HOURS: Final = WINDOW_DAYS * 24
AHEAD_HOURS: Final = 24
"""How far past the suite's clock the window reaches: a night's tasks run one after another, so
its newest experiment is up to a day ahead of the second newest; a run dated further ahead (a
wrong clock) counts when a second experiment comes within a day of it."""


def in_window(clock: int | None, hour: int) -> bool:
    """Whether `hour` is in the window of a suite whose clock is `clock` (None: no window yet,
    with fewer than two experiments)."""
    return clock is not None and clock - WINDOW_HOURS < hour <= clock + AHEAD_HOURS


def first_day(clock: int) -> int:
    """The window's first whole day, for the sparse detector's change days."""
    return clock // 24 - WINDOW_DAYS + 1
