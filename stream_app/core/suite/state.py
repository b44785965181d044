"""Has the agent got worse across its suite? The drop detectors of one `(suite, tier)`, pooled
over the suite's experiments from each run's exact evidence (`evidence`).

A suite's runs come from many input partitions in an order no replay reproduces, so its state is
a function of the *set* of runs it was given: each experiment's share (`share`) depends on that
experiment's own runs alone, and the statistics are computed from the shares in time order. Why
and how: docs/statistics.md, 'Suites'; docs/architecture.md, 'The suite hop'."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from stream_app.core.drop_detector import DETECTORS, FALLS, Detector, DropDesign
from stream_app.core.keyed_batch import FoldedBatch, KeyedFold
from stream_app.core.suite.evidence import SIZE, Evidence
from stream_app.core.suite.message import Retirement, SuiteItem, SuiteRun
from stream_app.core.suite.share import CELL, RUNS, ExperimentShare
from stream_app.core.suite.statistics import (
    POOLED_SHARE,
    accumulate,
    change_point_weight,
    detector_mean,
    evidence_ratio,
    exp_units,
    sparse_term,
)
from stream_app.core.suite.window import AHEAD_HOURS, HOUR_US, WINDOW_HOURS, first_day, in_window

MIN_EXPERIMENTS: Final = 2
"""Experiments with runs in the window a suite needs to page: one is its own tier's business."""


@dataclass(frozen=True, slots=True)
class SuiteStatus:
    """What a suite's detectors show now: each detector's evidence ratio (log(1 + R) / log(1 +
    threshold) of its pooled and its sparse statistic now, each against its own threshold, the
    larger), whether a page is in effect (a threshold reached at any hour's or day's end in the
    window), its experiments and runs."""

    dropped: bool
    evidence: dict[Detector, float]
    experiments: int
    runs: int


class SuiteState:
    """One `(suite, tier)`: every experiment's share, and what the statistics need of them,
    kept up to date run by run: the shares' evidence per hour summed, each experiment's per
    day, and the sparse detector's terms per (end hour, change day), all within the window.

    The window is the 14 days up to the suite's clock, `top`, and the day after it: the clock
    is the newest hour of the experiment second most recent (none with fewer than two), so that
    no single experiment's clock, a run dated years ahead say, moves the window away from the
    others'."""

    def __init__(self, shares: dict[str, ExperimentShare] | None = None) -> None:
        self.shares: dict[str, ExperimentShare] = dict(shares or {})
        self.top: int | None = None
        self.leader: tuple[int, str] | None = None
        """The newest hour of any experiment, and that experiment."""
        self.pooled: dict[int, list[int]] = {}
        self.cells: dict[int, int] = {}
        """How many experiments have evidence at each hour of `pooled`."""
        self.days: dict[str, dict[int, list[int]]] = {}
        self.pairs: dict[int, dict[int, list[int]]] = {}
        """For each end hour (an hour with evidence, on the window's whole days) and change
        day j up to its day: the experiments' sparse terms of their evidence since j, summed."""
        self._ends: list[int] = []
        """The end hours, in order; `_s` each one's sparse statistics, `_s_valid` how many of
        them are up to date."""
        self._s: list[list[float]] = []
        self._s_valid = 0
        self._pending: dict[str, dict[int, list[int]]] = {}
        """Evidence moved per experiment and hour since the sparse terms were last brought up
        to date (`_flush`)."""
        self._hours: list[int] = []
        """The window's hours with evidence, in order; `_r` each one's statistics after it."""
        self._r: list[list[float]] = []
        self._r_valid: int | None = None
        """How many of `_r` are up to date (None: `_hours` too must be made again)."""
        self._cap: float | None = None
        """The cap the cached statistics were made with."""
        self._mine: set[str] = set(self.shares)
        """The experiments whose share and day sums this state may change in place (a copy
        shares the others' with the state it was made from)."""
        self._stale = True
        """The statistics' inputs must be made again from the shares (after a removal: once
        however many experiments a batch retires)."""
        self.runs = 0
        """The runs of every share, counted as they come (not summed at each look)."""
        self.in_window: dict[str, int] = {}
        """Each experiment's hours with evidence in the window, counted as they change."""
        self.watched = 0
        """The experiments with evidence in the window (the count above 0)."""

    # Runs in and out.

    def add(self, experiment: str, run: SuiteRun) -> bool:
        """Count one run of `experiment`; False for a repeat. The state after any set of runs is
        the same in every order of the experiments (each experiment's own order kept)."""
        self._fresh()
        share = self._own(experiment)
        if not share.takes(run):
            return False
        self.runs += 1
        hour = run.completed_at_us // HOUR_US
        newest = share.newest
        if newest is not None and hour <= newest - WINDOW_HOURS:
            return True  # counted; its evidence is older than its experiment's window
        if newest is None or hour > newest:  # the share keeps its own window
            for old in sorted(h for h in share.hours if h <= hour - WINDOW_HOURS):
                values = share.hours.pop(old)
                if self._in_window(old):  # a leader's, behind the suite's clock: it leaves
                    self._watch(experiment, -1)
                    self._evidence(experiment, old, [-v for v in values])
                    self._day_left(experiment, share, old // 24)
                    self.cells[old] -= 1
                    if not self.cells[old]:
                        del self.cells[old], self.pooled[old]
                        self._r_valid = None
                        self._end_left(old)
            share.newest = hour
            self._clock(experiment, hour)
        if self._in_window(hour) and hour not in share.hours:
            self.cells[hour] = self.cells.get(hour, 0) + 1
            self._watch(experiment, 1)
        cell = (*run.evidence, 1)
        accumulate(share.hours.setdefault(hour, [0] * CELL), cell)
        if self._in_window(hour):
            self._evidence(experiment, hour, cell)
        return True

    def _own(self, experiment: str) -> ExperimentShare:
        """The experiment's share, this state's own to change (copied if shared)."""
        share = self.shares.get(experiment)
        if share is None or experiment not in self._mine:
            share = share.copy() if share is not None else ExperimentShare()
            self.shares[experiment] = share
            days = self.days.get(experiment)
            if days is not None:
                self.days[experiment] = {d: list(v) for d, v in days.items()}
            self._mine.add(experiment)
        return share

    def _clock(self, experiment: str, newest: int) -> None:
        """An experiment's newest hour moved to `newest`: the leader, and the suite's clock
        (the second newest hour), which may move the window."""
        if self.leader is None:
            self.leader = (newest, experiment)
            return
        hour, leader = self.leader
        if leader == experiment:
            self.leader = (newest, experiment)
            return
        second = newest
        if newest > hour or (newest == hour and experiment > leader):
            self.leader, second = (newest, experiment), hour
        if self.top is None:
            self._rebuild()  # a second experiment: the first window
        elif second > self.top:
            self._advance(second)

    def remove(self, experiment: str) -> bool:
        """Retire an experiment: its share goes, and the statistics are made again without it
        (when next needed). False when it had none."""
        if self.shares.pop(experiment, None) is None:
            return False
        self._mine.discard(experiment)
        self._stale = True
        return True

    def _fresh(self) -> None:
        if self._stale:
            self._rebuild()

    def _advance(self, top: int) -> None:
        """The suite's clock moves to `top`: the window slides. What leaves it goes (change
        days before its first whole day with it); then the evidence of the experiments already
        past the old window's end (the leader) comes in."""
        assert self.top is not None
        self._flush()
        old = self.top
        self.top = top
        first = self._first_day()
        self.pooled = {h: v for h, v in self.pooled.items() if self._in_window(h)}
        self.cells = {h: n for h, n in self.cells.items() if self._in_window(h)}
        self.days = {e: {d: v for d, v in b.items() if d >= first} for e, b in self.days.items()}
        self._ends = [h for h in self._ends if h // 24 >= first and self._in_window(h)]
        self.pairs = {h: {j: v for j, v in self.pairs[h].items() if j >= first} for h in self._ends}
        self._r_valid, self._s, self._s_valid = None, [], 0
        end = old + AHEAD_HOURS  # the old window's last hour
        for name, share in list(self.shares.items()):
            if share.newest is not None and share.newest > end:
                for hour in sorted(h for h in share.hours if h > end and self._in_window(h)):
                    self._own(name)  # its day sums, this state's to change
                    self.cells[hour] = self.cells.get(hour, 0) + 1
                    self._evidence(name, hour, share.hours[hour])
        self._count_watched()

    def _watch(self, experiment: str, hours: int) -> None:
        """`experiment` has `hours` more hours with evidence in the window (or fewer)."""
        before = self.in_window.get(experiment, 0)
        after = before + hours
        if after:
            self.in_window[experiment] = after
        else:
            del self.in_window[experiment]
        self.watched += (after > 0) - (before > 0)

    def _count_watched(self) -> None:
        """Each experiment's hours in the window, counted again (the window moved: once per hour
        of the suite's clock at most)."""
        self.in_window = {}
        for name, share in self.shares.items():
            count = sum(1 for h in share.hours if self._in_window(h))  # ints
            if count:
                self.in_window[name] = count
        self.watched = len(self.in_window)

    def _evidence(self, experiment: str, hour: int, values: Evidence | list[int]) -> None:
        """A cell's change of `experiment` at `hour` (in the window, its share's cell already
        moved) into the statistics' inputs."""
        accumulate(self.pooled.setdefault(hour, [0] * CELL), values)
        self._hour_changed(hour)
        self._sparse_changed(experiment, hour, values)

    def _day_left(self, experiment: str, share: ExperimentShare, day: int) -> None:
        """The experiment has no evidence left on `day` in the window: the day goes from its
        sums (it no longer counts as running there)."""
        if not any(h // 24 == day and self._in_window(h) for h in share.hours):
            self.days.get(experiment, {}).pop(day, None)

    def _hour_changed(self, hour: int) -> None:
        if self._r_valid is None:
            return
        i = bisect.bisect_left(self._hours, hour)
        if i == len(self._hours) or self._hours[i] != hour:
            self._hours.insert(i, hour)
        self._r_valid = min(self._r_valid, i)

    def _sparse_changed(self, experiment: str, hour: int, delta: Evidence | list[int]) -> None:
        """An experiment's evidence at `hour` (in the window) moved by `delta`: its day sum now,
        the sparse terms when next needed (`_flush`: once per experiment and hour changed,
        however many runs)."""
        assert self.top is not None
        day = hour // 24
        if day < self._first_day():  # the window's first, partial day: pooled detector only
            return
        days = self.days.setdefault(experiment, {})
        accumulate(days.setdefault(day, [0] * CELL), delta)
        pending = self._pending.setdefault(experiment, {})
        accumulate(pending.setdefault(hour, [0] * SIZE), delta)

    def _flush(self) -> None:
        """The pending changes into the sparse terms: first the new end hours, each starting as
        the one before it was (no experiment has evidence between them); then each
        experiment's terms, moved from its evidence before the changes to its evidence now."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        first = self._first_day()
        hours = sorted({h for changes in pending.values() for h in changes})
        for hour in hours:
            i = bisect.bisect_left(self._ends, hour)
            if (i == len(self._ends) or self._ends[i] != hour) and hour in self.pooled:
                before = self.pairs[self._ends[i - 1]] if i else {}
                self.pairs[hour] = {
                    j: list(before[j]) if j in before else [0] * SIZE
                    for j in range(first, hour // 24 + 1)
                }
                self._ends.insert(i, hour)
        start = bisect.bisect_left(self._ends, hours[0])
        self._s_valid = min(self._s_valid, start)
        for experiment, changes in pending.items():
            self._move_terms(experiment, changes, first)

    def _move_terms(self, experiment: str, changes: dict[int, list[int]], first: int) -> None:
        """One experiment's terms in every end hour from its first change on, for each change
        day j: from its evidence since j before `changes` to its evidence since j now."""
        cells = self.shares[experiment].hours
        days = self.days.get(experiment, {})
        by_day: dict[int, list[int]] = {}
        for hour, delta in changes.items():
            accumulate(by_day.setdefault(hour // 24, [0] * SIZE), delta)
        for end in self._ends[bisect.bisect_left(self._ends, min(changes)) :]:
            end_day = end // 24
            since, moved_by = [0] * SIZE, [0] * SIZE  # since j, j going down from end_day
            for h in range(end_day * 24, end + 1):
                on_hour, change = cells.get(h), changes.get(h)
                if on_hour is not None:
                    accumulate(since, on_hour)
                if change is not None:
                    accumulate(moved_by, change)
            terms = self.pairs[end]
            moved: list[int] = []
            for j in range(end_day, first - 1, -1):
                if j < end_day:
                    on_day, change = days.get(j), by_day.get(j)
                    if on_day is not None or change is not None:
                        moved = []
                        if on_day is not None:
                            accumulate(since, on_day)
                        if change is not None:
                            accumulate(moved_by, change)
                if not any(moved_by):
                    continue
                if not moved:
                    moved = [
                        sparse_term(v) - sparse_term(v - d) if d else 0
                        for v, d in zip(since, moved_by, strict=True)
                    ]
                pair = terms[j]
                for k, m in enumerate(moved):
                    pair[k] += m

    def _end_left(self, hour: int) -> None:
        """No experiment has evidence at `hour` any more: it is no end hour (after the pending
        changes, which may need it as the end hour before a new one)."""
        self._flush()
        i = bisect.bisect_left(self._ends, hour)
        if i < len(self._ends) and self._ends[i] == hour:
            del self._ends[i]
            self.pairs.pop(hour, None)
            self._s_valid = min(self._s_valid, i)

    def _first_day(self) -> int:
        assert self.top is not None
        return first_day(self.top)

    def _in_window(self, hour: int) -> bool:
        return in_window(self.top, hour)

    def _rebuild(self) -> None:
        """Everything the statistics need, made again from the shares."""
        self._stale = False
        self.runs = sum(s.runs for s in self.shares.values())  # ints
        clocks = sorted((s.newest, n) for n, s in self.shares.items() if s.newest is not None)
        self.leader = clocks[-1] if clocks else None
        self.top = clocks[-2][0] if len(clocks) > 1 else None
        self.pooled, self.cells, self.days, self.pairs = {}, {}, {}, {}
        self._r_valid, self._ends, self._s, self._s_valid = None, [], [], 0
        self._pending = {}
        self._count_watched()
        if self.top is None:
            return
        first = self._first_day()
        mine: dict[str, list[tuple[int, list[int]]]] = {}
        for name, share in self.shares.items():
            days: dict[int, list[int]] = {}
            for hour, values in share.hours.items():
                if self._in_window(hour):
                    accumulate(self.pooled.setdefault(hour, [0] * CELL), values)
                    self.cells[hour] = self.cells.get(hour, 0) + 1
                    if hour // 24 >= first:
                        accumulate(days.setdefault(hour // 24, [0] * CELL), values)
                        mine.setdefault(name, []).append((hour, values))
            self.days[name] = days
        self._ends = sorted(h for h in self.pooled if h // 24 >= first)
        self.pairs = {h: {j: [0] * SIZE for j in range(first, h // 24 + 1)} for h in self._ends}
        for cells in mine.values():
            self._add_terms(sorted(cells), first)

    def _add_terms(self, cells: list[tuple[int, list[int]]], first: int) -> None:
        """One experiment's sparse terms (from its cells in the window, in hour order) into
        every end hour's: they change only at its own cells, and are 0 for a change day after
        its last one."""
        total = [0] * SIZE  # its evidence up to the end hour
        upto: dict[int, list[int]] = {}  # before each change day
        terms: dict[int, list[int]] = {}
        c = 0
        for end in self._ends:
            if c < len(cells) and cells[c][0] <= end:
                while c < len(cells) and cells[c][0] <= end:
                    hour, values = cells[c]
                    for j in range(first, hour // 24 + 1):
                        upto.setdefault(j, list(total))
                    accumulate(total, values)
                    c += 1
                terms = {
                    j: [
                        sparse_term(t - b) if t != b else 0
                        for t, b in zip(total, before, strict=True)
                    ]
                    for j, before in upto.items()
                }
            pairs = self.pairs[end]
            for j, values in terms.items():
                pair = pairs[j]
                for k, v in enumerate(values):
                    pair[k] += v

    # The statistics.

    def status(self, design: DropDesign) -> SuiteStatus:
        """The detectors now, and whether a page is in effect."""
        self._fresh()
        pooled_threshold = design.threshold / POOLED_SHARE
        sparse_threshold = design.threshold / (1 - POOLED_SHARE)
        cap = design.threshold / (1 - POOLED_SHARE) * len(FALLS)
        if cap != self._cap:
            self._cap, self._r_valid, self._s_valid = cap, None, 0
        pooled = self._pooled_statistics(pooled_threshold)
        sparse = self._sparse_statistics(sparse_threshold)
        dropped = self.watched >= MIN_EXPERIMENTS and any(
            any(detector_mean(r, d) >= pooled_threshold for r in pooled)
            or any(detector_mean(s, d) >= sparse_threshold for s in sparse)
            for d in range(len(DETECTORS))
        )
        evidence = {
            detector: round(
                max(
                    evidence_ratio(
                        detector_mean(pooled[-1], d) if pooled else 0.0, pooled_threshold
                    ),
                    evidence_ratio(
                        detector_mean(sparse[-1], d) if sparse else 0.0, sparse_threshold
                    ),
                ),
                6,
            )
            for d, detector in enumerate(DETECTORS)
        }
        return SuiteStatus(dropped, evidence, len(self.shares), self.runs)

    def _pooled_statistics(self, threshold: float) -> list[list[float]]:
        """Each component's Shiryaev-Roberts statistic at the end of every hour with evidence in
        the window, in time order: R <- (w + R) exp(the hour's summed log e), the change point
        at the hour's start weighing w, the runs of the hour with runs before it (`_weight`)."""
        if self._r_valid is None:
            self._hours, self._r, self._r_valid = sorted(self.pooled), [], 0
        cap = threshold * len(FALLS)
        del self._r[self._r_valid :]
        r = self._r[-1] if self._r else [0.0] * SIZE
        for k in range(self._r_valid, len(self._hours)):
            w = change_point_weight(self.pooled[self._hours[k - 1]][RUNS], 60) if k else 1
            logs = self.pooled[self._hours[k]]
            r = [min((w + r[i]) * exp_units(logs[i]), cap) for i in range(SIZE)]
            self._r.append(r)
        self._r_valid = len(self._r)
        return self._r

    def _sparse_statistics(self, threshold: float) -> list[list[float]]:
        """Each component's sparse statistic at the end of every end hour: for each change day
        j with runs, the product over experiments of (1 - pi + pi * their evidence since j)
        (whose log, the experiments' terms summed, is kept per end hour and j), weighted by the
        runs of the day with runs before j (`_weight`), summed over j."""
        self._flush()
        cap = threshold * len(FALLS)
        del self._s[self._s_valid :]
        first = self._first_day() if self._ends else 0
        day_runs: dict[int, int] = {}  # the runs of each of the window's whole days
        for hour, cell in self.pooled.items():
            if hour // 24 >= first:
                day_runs[hour // 24] = day_runs.get(hour // 24, 0) + cell[RUNS]
        for end in self._ends[self._s_valid :]:
            total = [0.0] * SIZE
            before: int | None = None  # the last day with runs before j
            for j in range(first, end // 24 + 1):
                if j not in day_runs:
                    continue  # no change point: its evidence since is the next day's
                w = 1 if before is None else change_point_weight(day_runs[before], 24 * 60)
                before = j
                pair = self.pairs[end][j]
                for i in range(SIZE):
                    total[i] += w * exp_units(pair[i])
            self._s.append([min(v, cap) for v in total])
        self._s_valid = len(self._s)
        return self._s

    # Stored.

    def to_state(self) -> dict[str, Any]:
        """JSON-able: every share, by experiment (what the suite table stores, a record each)."""
        return {name: self.shares[name].to_state() for name in sorted(self.shares)}

    def copy(self) -> SuiteState:
        """An independent copy, so that a batch can go back to the state before it."""
        if self._stale:
            return SuiteState({name: share.copy() for name, share in self.shares.items()})
        self._flush()
        out = SuiteState.__new__(SuiteState)
        out._stale, out._cap = False, self._cap
        out.shares, out.days = dict(self.shares), dict(self.days)  # shared until changed
        out._mine, self._mine = set(), set()
        out.top, out.leader = self.top, self.leader
        out.runs, out.in_window, out.watched = self.runs, dict(self.in_window), self.watched
        out.pooled = {h: list(v) for h, v in self.pooled.items()}
        out.cells = dict(self.cells)
        out.pairs = {h: {j: list(v) for j, v in p.items()} for h, p in self.pairs.items()}
        out._hours, out._r, out._r_valid = list(self._hours), list(self._r), self._r_valid
        out._ends, out._s, out._s_valid = list(self._ends), list(self._s), self._s_valid
        out._pending = {}
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
