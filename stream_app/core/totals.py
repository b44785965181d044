"""A tier's counts since its first run: what its cumulative pass rate, its composite mean and their
intervals need, and what the cross-tier stage compares with the baseline. Three numbers, however
many runs: O(1) per tier, retired with the experiment.

Scores are summed in fixed point (`units`: integer multiples of 2**-53, exact), so that a sum
does not depend on the order the runs arrived in: float addition would, by the last bit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from stream_app.core.window import WindowEntry

UNIT: Final = 2**53
"""Fixed-point units per 1.0 of a score in [0, 1] (a score's rounding error is below 1e-16)."""


def units(value: float) -> int:
    """A score in fixed point."""
    return round(value * UNIT)


def _units_ok(value: Any, most: int) -> bool:
    """A stored fixed-point sum: an integer in 0..most."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most


@dataclass(frozen=True, slots=True)
class Totals:
    """Accepted runs, how many passed, and the sum of their composite scores (fixed point)."""

    runs: int = 0
    passes: int = 0
    composite_units: int = 0
    """The composite scores' sum in fixed point (`units`): exact whatever the runs' order."""

    @property
    def composite_sum(self) -> float:
        """The sum of the composite scores."""
        return self.composite_units / UNIT

    def add(self, entry: WindowEntry) -> Totals:
        """With one more accepted run."""
        return Totals(
            self.runs + 1,
            self.passes + (entry.pass_rate == 1.0),
            self.composite_units + units(entry.composite_score),
        )

    @classmethod
    def of(cls, entries: Any) -> Totals:
        """The totals of some runs (a window, for a state stored before totals were kept)."""
        totals = cls()
        for entry in entries:
            totals = totals.add(entry)
        return totals

    def to_state(self) -> list[Any]:
        """JSON-able: [runs, passes, composite sum in units]."""
        return [self.runs, self.passes, self.composite_units]

    @classmethod
    def from_state(cls, data: Any) -> Totals:
        """Load `to_state`'s output; raises ValueError when it is not one any runs make."""
        if not isinstance(data, list) or len(data) != 3:
            raise ValueError("totals are not [runs, passes, composite sum]")
        runs, passes, composite = data
        counts = (runs, passes)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in counts):
            raise ValueError("totals have a count that is not an integer")
        if not 0 <= passes <= runs < 2**53:
            raise ValueError("totals have passes outside 0..runs")
        if not _units_ok(composite, runs * UNIT):
            raise ValueError("totals have a composite sum outside 0..runs")
        return cls(runs, passes, composite)
