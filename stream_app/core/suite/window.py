"""The suite tier's window: the 14 days up to the suite's clock, and the day after it. The clock
is the newest hour of the experiment second most recent, so that no single experiment's clock
(a run dated years ahead, say) moves the window away from the others'."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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


@dataclass(slots=True)
class SuiteClock:
    """The suite's clock, `top` (None with fewer than two experiments), and its `leader`: the
    newest hour of any experiment, and that experiment."""

    top: int | None = None
    leader: tuple[int, str] | None = None

    @classmethod
    def of(cls, newest: Iterable[tuple[int, str]]) -> SuiteClock:
        """The clock of experiments whose newest hours are `newest` ((hour, experiment) each)."""
        clocks = sorted(newest)
        return cls(clocks[-2][0] if len(clocks) > 1 else None, clocks[-1] if clocks else None)

    def moved(self, experiment: str, newest: int) -> int | None:
        """An experiment's newest hour moved to `newest`: the leader follows, and the clock's
        next value comes back when the clock must move (the second newest hour; the first
        window when there was none), else None."""
        if self.leader is None:
            self.leader = (newest, experiment)
            return None
        hour, leader = self.leader
        if leader == experiment:
            self.leader = (newest, experiment)
            return None
        second = newest
        if newest > hour or (newest == hour and experiment > leader):
            self.leader, second = (newest, experiment), hour
        return second if self.top is None or second > self.top else None

    def holds(self, hour: int) -> bool:
        """Whether `hour` is in the window."""
        return in_window(self.top, hour)

    def first_day(self) -> int:
        """The window's first whole day (there is a window)."""
        assert self.top is not None
        return first_day(self.top)

    def first_whole_day(self) -> int | None:
        """The window's first whole day; None without a window."""
        return None if self.top is None else first_day(self.top)


@dataclass(slots=True)
class Watched:
    """Each experiment's hours with evidence in the window, and how many experiments have some,
    counted as they change (not at each look)."""

    hours: dict[str, int] = field(default_factory=dict)
    experiments: int = 0

    def add(self, experiment: str, hours: int) -> None:
        """`experiment` has `hours` more hours with evidence in the window (or fewer)."""
        before = self.hours.get(experiment, 0)
        after = before + hours
        if after:
            self.hours[experiment] = after
        else:
            del self.hours[experiment]
        self.experiments += (after > 0) - (before > 0)

    @classmethod
    def count(cls, hours: Mapping[str, Iterable[int]], clock: SuiteClock) -> Watched:
        """Counted again over each experiment's hours (the window moved: once per hour of the
        suite's clock at most)."""
        counts = {name: sum(map(clock.holds, own)) for name, own in hours.items()}  # ints
        watched = {name: n for name, n in counts.items() if n}
        return cls(watched, len(watched))

    def copy(self) -> Watched:
        """An independent copy."""
        return Watched(dict(self.hours), self.experiments)
