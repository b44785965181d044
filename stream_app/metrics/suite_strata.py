"""One sign's strata of a suite figure, kept as the test reads them: how many, a histogram of
their run counts, and exact sums of their rates, values and spreads. A stratum that moves is
taken out and put back in, so a figure costs the same whatever the suite's size
(`suite_comparison`), and is the same float as one made from every stratum at once."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable

from stream_app.metrics.exact_sum import ExactSum
from stream_app.metrics.suite_outcomes import Stratum


class StrataSet:
    """A multiset of strata, each with runs, counted by their sums."""

    __slots__ = ("count", "rates", "runs", "sizes", "spreads", "totals")

    def __init__(self, strata: Iterable[Stratum] = ()) -> None:
        self.count = 0
        self.runs = 0
        """The strata's runs, summed (an int)."""
        self.sizes: dict[int, int] = {}
        """How many strata have each run count."""
        self.rates = ExactSum()
        """Of each stratum's total / runs."""
        self.totals = ExactSum()
        self.spreads = ExactSum()
        for stratum in strata:
            self.add(stratum)

    def add(self, stratum: Stratum) -> None:
        """Count a stratum in (it needs runs)."""
        self._change(stratum, 1)

    def remove(self, stratum: Stratum) -> None:
        """Take out a stratum counted in before, as it was then."""
        self._change(stratum, -1)

    def _change(self, stratum: Stratum, sign: int) -> None:
        runs, total, spread = stratum
        if runs <= 0:
            raise ValueError("a suite figure needs experiments, each stratum with runs")
        self.count += sign
        self.runs += sign * runs
        left = self.sizes.get(runs, 0) + sign
        if left:
            self.sizes[runs] = left
        else:
            del self.sizes[runs]
        rate = total / runs
        self.rates.add(sign * rate)
        self.totals.add(sign * total)
        self.spreads.add(sign * spread)


class SizeGroups:
    """Strata's run counts in a fixed order (descending or ascending), grouped by value: the
    stratum at any position and the sum of the first j, in the time of a bisection."""

    __slots__ = ("count", "sizes", "starts", "sums")

    def __init__(self, sets: Iterable[StrataSet], descending: bool) -> None:
        counts: dict[int, int] = {}
        for strata in sets:
            for runs, n in strata.sizes.items():
                counts[runs] = counts.get(runs, 0) + n
        self.sizes = sorted(counts, reverse=descending)
        """The distinct run counts, in order."""
        self.starts = [0, *itertools.accumulate(counts[s] for s in self.sizes)]
        """The position of each value's first stratum; the last: how many strata."""
        self.sums = [0, *itertools.accumulate(s * counts[s] for s in self.sizes)]
        """The runs of the strata before each value's first."""
        self.count = self.starts[-1]

    def size_at(self, position: int) -> int:
        """The run count of the stratum at `position` (0-based, in order)."""
        return self.sizes[bisect.bisect_right(self.starts, position) - 1]
