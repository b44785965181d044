"""What a suite comparison needs of one `(experiment, tier)`, a stratum: its runs, the sums of
each figure's values, their spread about a predictable estimate of each, and when the stratum's
runs came (which say when it closed, `suite_units`). Two figures: the pass rate and the mean
composite, both in [0, 1]."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple


def estimate_before(total: float, runs: int) -> float:
    """The predictable estimate of the next value after `runs` values summing to `total`:
    (total + 1/2) / (runs + 1), about which a stratum's (or the units') spread is taken."""
    return (total + 0.5) / (runs + 1)


class Figure(Enum):
    """A figure a suite compares across its experiments."""

    PASS_RATE = "pass_rate"
    COMPOSITE = "composite"


class Stratum(NamedTuple):
    """What the test needs of a stratum: its runs, the sum of their values in [0, 1], and
    their spread about a predictable estimate of each (the sum of squares)."""

    runs: int
    total: float
    spread: float


@dataclass(frozen=True, slots=True)
class Outcomes:
    """A stratum's runs: how many; how many passed, and the sum of their composites; each
    figure's spread about the stratum's estimate before each run, (sum + 1/2) / (n + 1); and
    when its current incarnation's first run and its latest run completed (microseconds)."""

    runs: int = 0
    passes: int = 0
    spread: float = 0.0
    composite: float = 0.0
    composite_spread: float = 0.0
    start: int = 0
    latest: int = 0

    def of(self, figure: Figure) -> Stratum:
        """The stratum of one figure, as the test takes it."""
        if figure is Figure.PASS_RATE:
            return Stratum(self.runs, float(self.passes), self.spread)
        return Stratum(self.runs, self.composite, self.composite_spread)

    def add(self, passed: bool, composite: float, at: int, restart: bool = False) -> Outcomes:
        """With one more run, its composite in [0, 1], completed at `at`; `restart`: the first
        of a new incarnation."""
        pass_guess = estimate_before(self.passes, self.runs)
        composite_guess = estimate_before(self.composite, self.runs)
        return Outcomes(
            self.runs + 1,
            self.passes + passed,
            self.spread + (passed - pass_guess) ** 2,
            self.composite + composite,
            self.composite_spread + (composite - composite_guess) ** 2,
            at if restart or not self.runs else min(self.start, at),
            max(self.latest, at) if self.runs else at,
        )
