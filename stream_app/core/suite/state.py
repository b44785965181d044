"""Has the agent got worse across its suite? The drop detectors of one `(suite, tier)`, pooled
over the suite's experiments from each run's exact evidence (`evidence`).

A suite's runs come from many input partitions in an order no replay reproduces, so its state is
a function of the *set* of runs it was given: each experiment's share (`share`) depends on that
experiment's own runs alone, and the statistics are computed from the shares in time order. Why
and how: docs/statistics.md, 'Suites'; docs/architecture.md, 'The suite hop'."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from stream_app.core.drop_detector import DropDesign
from stream_app.core.keyed_batch import FoldedBatch, KeyedFold
from stream_app.core.suite.arithmetic import accumulate
from stream_app.core.suite.comparison import TierComparison
from stream_app.core.suite.message import Retirement, SuiteItem, SuiteRun
from stream_app.core.suite.share import CELL, ExperimentShare
from stream_app.core.suite.statistics import SuiteStatistics, SuiteStatus
from stream_app.core.suite.window import (
    AHEAD_HOURS,
    HOUR_US,
    WINDOW_HOURS,
    SuiteClock,
    Watched,
)


class SuiteState:
    """One `(suite, tier)`: every experiment's share, the window's clock (the 14 days up to it
    and the day after), and the detectors' statistics kept up to date run by run
    (`SuiteStatistics`: a cache made again from the shares whenever a removal leaves it stale);
    its comparison (`core.suite.comparison`), which the report updates with what `moved`."""

    def __init__(self, shares: dict[str, ExperimentShare] | None = None) -> None:
        self.shares: dict[str, ExperimentShare] = dict(shares or {})
        self.clock = SuiteClock()
        self.statistics = SuiteStatistics()
        self.runs = 0
        """The runs of every share, counted as they come (not summed at each look)."""
        self.watched = Watched()
        self._mine: set[str] = set(self.shares)
        """The experiments whose share this state may change in place (a copy shares the
        others' with the state it was made from)."""
        self._stale = True
        """The statistics must be made again from the shares (after removals: once a batch)."""
        self.moved: set[str] = set()
        """The experiments whose outcomes moved, or that left, since `comparison` saw them."""
        self.comparison: TierComparison | None = None

    def add(self, experiment: str, run: SuiteRun) -> bool:
        """Count one run of `experiment`; False for a repeat. The state after any set of runs is
        the same in every order of the experiments (each experiment's own order kept)."""
        if self._stale:
            self._rebuild()
        share = self._own(experiment)
        if not share.takes(run):
            return False
        self.moved.add(experiment)
        self.runs += 1
        hour = run.completed_at_us // HOUR_US
        newest = share.newest
        if newest is not None and hour <= newest - WINDOW_HOURS:
            return True  # counted; its evidence is older than its experiment's window
        if newest is None or hour > newest:  # the share keeps its own window
            for old in sorted(h for h in share.hours if h <= hour - WINDOW_HOURS):
                self._leaves(experiment, share, old)
            share.newest = hour
            top = self.clock.moved(experiment, hour)
            if top is not None:
                if self.clock.top is None:
                    self._rebuild()  # a second experiment: the first window
                else:
                    self._advance(top)
        if self.clock.holds(hour) and hour not in share.hours:
            self.statistics.pooled.enter(hour)
            self.watched.add(experiment, 1)
        cell = (*run.evidence, 1)
        accumulate(share.hours.setdefault(hour, [0] * CELL), cell)
        if self.clock.holds(hour):
            self.statistics.evidence(experiment, hour, cell, self.clock.first_day())
        return True

    def _leaves(self, experiment: str, share: ExperimentShare, old: int) -> None:
        """The share's hour `old` leaves its own window (its newest moved on)."""
        values = share.hours.pop(old)
        if not self.clock.holds(old):
            return
        # a leader's, behind the suite's clock: it leaves the statistics too
        first = self.clock.first_day()
        self.watched.add(experiment, -1)
        self.statistics.evidence(experiment, old, [-v for v in values], first)
        self.statistics.hour_left(old, first, self.hours_of)

    def _own(self, experiment: str) -> ExperimentShare:
        """The experiment's share, this state's own to change (copied if shared)."""
        share = self.shares.get(experiment)
        if share is None or experiment not in self._mine:
            share = share.copy() if share is not None else ExperimentShare()
            self.shares[experiment] = share
            self._mine.add(experiment)
        return share

    def hours_of(self, experiment: str) -> dict[int, list[int]]:
        """An experiment's cells per hour."""
        return self.shares[experiment].hours

    def remove(self, experiment: str) -> bool:
        """Retire an experiment: its share goes, and the statistics are made again without it
        (when next needed). False when it had none."""
        if self.shares.pop(experiment, None) is None:
            return False
        self._mine.discard(experiment)
        self._stale = True
        self.moved.add(experiment)
        return True

    def _advance(self, top: int) -> None:
        """The suite's clock moves to `top`: the window slides. What leaves it goes (change
        days before its first whole day with it); then the evidence of the experiments already
        past the old window's end (the leader) comes in."""
        assert self.clock.top is not None
        self._flush()
        old = self.clock.top
        self.clock.top = top
        first = self.clock.first_day()
        self.statistics.slide(first, self.clock.holds)
        end = old + AHEAD_HOURS  # the old window's last hour
        for name, share in list(self.shares.items()):
            if share.newest is not None and share.newest > end:
                for hour in sorted(h for h in share.hours if h > end and self.clock.holds(h)):
                    self.statistics.pooled.enter(hour)
                    self.statistics.evidence(name, hour, share.hours[hour], first)
        self.watched = self._count_watched()

    def _count_watched(self) -> Watched:
        return Watched.count({n: s.hours for n, s in self.shares.items()}, self.clock)

    def _flush(self) -> None:
        if self.clock.top is not None:
            self.statistics.flush(self.clock.first_day(), self.hours_of)

    def _rebuild(self) -> None:
        """The statistics and the counts, made again from the shares."""
        self._stale = False
        self.runs = sum(s.runs for s in self.shares.values())  # ints
        self.clock = SuiteClock.of(
            (s.newest, n) for n, s in self.shares.items() if s.newest is not None
        )
        self.statistics = SuiteStatistics.of(self.shares, self.clock)
        self.watched = self._count_watched()

    def status(self, design: DropDesign) -> SuiteStatus:
        """The detectors now, and whether a page is in effect."""
        if self._stale:
            self._rebuild()
        dropped, evidence = self.statistics.read(
            design, self.clock.first_whole_day(), self.hours_of, self.watched.experiments
        )
        return SuiteStatus(dropped, evidence, len(self.shares), self.runs)

    def copy(self) -> SuiteState:
        """An independent copy, so that a batch can go back to the state before it."""
        if self._stale:
            return SuiteState({name: share.copy() for name, share in self.shares.items()})
        self._flush()
        out = SuiteState.__new__(SuiteState)
        out._stale, out.moved, out.comparison = False, set(), None
        out.shares = dict(self.shares)  # shared until changed
        out._mine, self._mine = set(), set()
        out.clock = SuiteClock(self.clock.top, self.clock.leader)
        out.runs, out.watched = self.runs, self.watched.copy()
        out.statistics = self.statistics.copy()
        return out


def fold_suite_items(
    items: Iterable[tuple[str, SuiteItem]],
    load: Callable[[str], SuiteState | None],
    design: DropDesign,
) -> FoldedBatch[str, SuiteState, str | None, SuiteStatus]:
    """Suite items (suite key, run or retirement) into their suites, each changed one's
    detectors read once; a repeat changes nothing. Each step names the experiment whose share it
    changed (to store), None for none. The suite hop's fold; what the suite's tiers show is made
    from the states, all tiers of a suite together (`core.suite.report`)."""

    def step(state: SuiteState, item: SuiteItem) -> tuple[bool, str | None]:
        experiment = item.experiment_id
        if isinstance(item, Retirement):
            changed = state.remove(experiment)
        else:
            changed = state.add(experiment, item)
        return changed, experiment if changed else None

    def finish(key: str, state: SuiteState) -> SuiteStatus:
        return state.status(design)

    return KeyedFold(load, lambda _: SuiteState(), SuiteState.copy, step, finish).run(list(items))
