"""A sum of floats kept exactly as values come and go, so that a figure updated one stratum at a
time is the same float as `math.fsum` of every value at once: Shewchuk's non-overlapping
partials (the algorithm behind `math.fsum`), to which adding -x removes x exactly."""

from __future__ import annotations

import math


class ExactSum:
    """The exact sum of the values added (and of the negated values removed)."""

    __slots__ = ("partials",)

    def __init__(self) -> None:
        self.partials: list[float] = []
        """Non-overlapping floats whose exact sum is the sum (Shewchuk 1997)."""

    def add(self, value: float) -> None:
        """Add `value` exactly (finite values only)."""
        partials = self.partials
        kept = 0
        for partial in partials:
            big, small = (partial, value) if abs(value) < abs(partial) else (value, partial)
            high = big + small
            low = small - (high - big)
            if low:
                partials[kept] = low
                kept += 1
            value = high
        partials[kept:] = [value]

    def remove(self, value: float) -> None:
        """Take out a value added before, exactly."""
        self.add(-value)

    def value(self) -> float:
        """The sum, correctly rounded: what `math.fsum` of the values gives."""
        return math.fsum(self.partials)

    def negated(self) -> list[float]:
        """Partials whose sum is minus this sum (exactly)."""
        return [-p for p in self.partials]
