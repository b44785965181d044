"""A suite tier's comparisons, kept up to date as its strata move: its mean of each figure over
its experiments and, with the baseline, its paired difference. Each is a cache of sums
(`metrics.suite_strata`) and units (`metrics.suite_units`) from which a stratum is taken out and
put back when it moves, so that a report costs the same whatever the suite's size; the figures
are the same floats as those made from every stratum at once. Made anew with its state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Protocol

from stream_app.metrics.suite_comparison import SuiteFigure, difference_of, mean_of
from stream_app.metrics.suite_outcomes import Figure, Outcomes
from stream_app.metrics.suite_strata import StrataSet
from stream_app.metrics.suite_units import ClosedUnits, Closings, difference_unit

FIGURES: Final = tuple(Figure)
"""The figures, in the order a comparison's units keep them (one order and key list for all:
they close together)."""


class HasOutcomes(Protocol):
    """An experiment's share, as far as the comparisons read it."""

    @property
    def outcomes(self) -> Outcomes:
        """The outcomes of its runs."""


class Compared(Protocol):
    """A suite tier's state, as far as its comparison reads it: its shares, the experiments
    whose outcomes moved since (or that left), and its comparison (None: not made yet)."""

    moved: set[str]
    comparison: TierComparison | None

    @property
    def shares(self) -> Mapping[str, HasOutcomes]:
        """Each experiment's share."""


def compared(state: Compared) -> tuple[TierComparison, set[str] | None, int]:
    """The state's comparison brought up to date with the experiments that moved since it was
    last (made when it has none), what changed (None: everything) and its version before."""
    comparison = state.comparison
    if comparison is None:
        comparison = state.comparison = TierComparison()
        comparison.update(state.shares, list(state.shares))
        state.moved.clear()
        return comparison, None, -1
    before = comparison.version
    changed = comparison.update(state.shares, state.moved)
    state.moved.clear()
    return comparison, changed, before


class TierComparison:
    """One suite tier's strata as the comparisons read them: each experiment's outcomes as last
    seen, when each closed, each figure's sums and units; and its pairs with the baseline."""

    def __init__(self) -> None:
        self.seen: dict[str, Outcomes] = {}
        self.closings = Closings()
        self.means = {figure: StrataSet() for figure in Figure}
        self.units: ClosedUnits[str] = ClosedUnits(len(FIGURES))
        """Every figure's units, in the order of FIGURES."""
        self.paired = PairedComparison()
        self.version = 0
        """Counts the updates that changed something (the pairs follow it)."""
        self._figures: dict[tuple[Figure, float], SuiteFigure | None] = {}

    def update(self, shares: Mapping[str, HasOutcomes], moved: Iterable[str]) -> set[str]:
        """The experiments of `moved` as `shares` has them now (gone when absent); returns
        those whose outcomes or closing changed."""
        changed: set[str] = set()
        for name in moved:
            old, share = self.seen.get(name), shares.get(name)
            new = None if share is None else share.outcomes
            if old == new:
                continue
            changed.add(name)
            if old is not None and old.runs:
                for figure, strata in self.means.items():
                    strata.remove(old.of(figure))
            if new is None:
                del self.seen[name]
                changed |= self.closings.drop(name)
                continue
            self.seen[name] = new
            if new.runs:
                for figure, strata in self.means.items():
                    strata.add(new.of(figure))
            changed |= self.closings.move(name, new)
        for name in changed:
            outcomes, closed = self.seen.get(name), self.closings.closed.get(name)
            if outcomes is None or not outcomes.runs:
                self.units.remove(name)
            else:
                figures = [outcomes.of(figure) for figure in FIGURES]
                self.units.put(name, closed, *(f.total / f.runs for f in figures))
        if changed:
            self.version += 1
            self._figures.clear()
        return changed

    def mean(self, figure: Figure, confidence: float) -> SuiteFigure | None:
        """The tier's mean of `figure` (`metrics.suite_comparison.mean_of`)."""
        key = (figure, confidence)
        if key not in self._figures:
            units = self.units.of(FIGURES.index(figure))
            self._figures[key] = mean_of(self.means[figure], units, confidence)
        return self._figures[key]


class PairedComparison:
    """A tier's pairs with the baseline (the experiments both have runs in): each one's
    outcomes and closing, and each figure's sums and units; in step with both tiers'
    comparisons at the versions it last followed (else made again from them)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """No pairs (no baseline to pair with)."""
        self.pairs: dict[str, tuple[Outcomes, Outcomes, int | None]] = {}
        self.tiers = {figure: StrataSet() for figure in Figure}
        self.bases = {figure: StrataSet() for figure in Figure}
        self.units: ClosedUnits[str] = ClosedUnits(len(FIGURES))
        """Every figure's units, in the order of FIGURES."""
        self.followed: tuple[TierComparison, int, int] | None = None
        """The baseline's comparison, its version and the tier's, when last followed."""
        self._figures: dict[tuple[Figure, float], SuiteFigure | None] = {}

    def follow(
        self,
        own: TierComparison,
        base: TierComparison,
        changed: set[str] | None,
        versions: tuple[int, int],
    ) -> None:
        """Follow both comparisons: `changed`, the experiments that changed in either since
        `versions` (the tier's and the baseline's before); None, or versions other than those
        last followed: every experiment again."""
        if changed is None or self.followed != (base, versions[1], versions[0]):
            self.clear()
            changed = own.seen.keys() | base.seen.keys()
        for name in changed:
            self._pair(name, own, base)
        if changed:
            self._figures.clear()
        self.followed = (base, base.version, own.version)

    def _pair(self, name: str, own: TierComparison, base: TierComparison) -> None:
        old = self.pairs.pop(name, None)
        if old is not None:
            for figure in Figure:
                self.tiers[figure].remove(old[0].of(figure))
                self.bases[figure].remove(old[1].of(figure))
            self.units.remove(name)
        tier, baseline = own.seen.get(name), base.seen.get(name)
        if tier is None or baseline is None or not tier.runs or not baseline.runs:
            return
        t, b = own.closings.closed[name], base.closings.closed[name]
        closed = None if t is None or b is None else max(t, b)
        self.pairs[name] = (tier, baseline, closed)
        values: list[float] = []
        for figure in FIGURES:
            tier_stratum, base_stratum = tier.of(figure), baseline.of(figure)
            self.tiers[figure].add(tier_stratum)
            self.bases[figure].add(base_stratum)
            values.append(
                difference_unit(
                    tier_stratum.total / tier_stratum.runs, base_stratum.total / base_stratum.runs
                )
            )
        self.units.put(name, closed, *values)

    def difference(self, figure: Figure, confidence: float) -> SuiteFigure | None:
        """The tier's paired difference of `figure` (`suite_comparison.difference_of`)."""
        key = (figure, confidence)
        if key not in self._figures:
            self._figures[key] = difference_of(
                self.tiers[figure],
                self.bases[figure],
                self.units.of(FIGURES.index(figure)),
                confidence,
            )
        return self._figures[key]
