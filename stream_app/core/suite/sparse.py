"""The sparse detector's inputs (some of a suite's experiments fell, the change at any whole day
of the window): per end hour and change day j the sum over experiments of their terms
log(1 - pi + pi e^L), L their evidence since j; kept up to date as cells move, brought up to
date once per experiment and hour changed (`flush`), however many runs. Its statistics read
from them. docs/statistics.md, 'Suites'."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping

from stream_app.core.drop_detector import FALLS
from stream_app.core.suite.arithmetic import (
    accumulate,
    change_point_weight,
    exp_units,
    sparse_term,
)
from stream_app.core.suite.evidence import SIZE, Evidence
from stream_app.core.suite.share import RUNS

Cells = dict[int, list[int]]
"""Sums per hour (or per day): the evidence, then the run count (a cell)."""
HoursOf = Callable[[str], Cells]
"""An experiment's cells per hour (its share's)."""


class SparseStatistics:
    """The sparse detector's inputs and its statistic at each end hour (an hour with evidence,
    on the window's whole days)."""

    def __init__(self) -> None:
        self.terms: dict[int, dict[int, list[int]]] = {}
        """For each end hour and change day j up to its day: the experiments' terms of their
        evidence since j, summed."""
        self.ends: list[int] = []
        """The end hours, in order."""
        self.values: list[list[float]] = []
        """Each end hour's statistic, up to `valid` of them."""
        self.valid = 0
        self.pending: dict[str, dict[int, list[int]]] = {}
        """Evidence moved per experiment and hour since the terms were last brought up to date."""

    def changed(self, experiment: str, hour: int, delta: Evidence | list[int], first: int) -> None:
        """An experiment's evidence at `hour` (in the window) moved by `delta`: the terms when
        next needed (`flush`)."""
        if hour // 24 < first:  # the window's first, partial day: pooled detector only
            return
        accumulate(self.pending.setdefault(experiment, {}).setdefault(hour, [0] * SIZE), delta)

    def flush(self, first: int, pooled: Cells, hours_of: HoursOf) -> None:
        """The pending changes into the terms: first the new end hours, each starting as the one
        before it was (no experiment has evidence between them); then each experiment's terms,
        moved from its evidence before the changes to its evidence now. `pooled`: the window's
        hour sums (an end hour has some)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, {}
        hours = sorted({h for changes in pending.values() for h in changes})
        for hour in hours:
            i = bisect.bisect_left(self.ends, hour)
            if (i == len(self.ends) or self.ends[i] != hour) and hour in pooled:
                before = self.terms[self.ends[i - 1]] if i else {}
                self.terms[hour] = {
                    j: list(before[j]) if j in before else [0] * SIZE
                    for j in range(first, hour // 24 + 1)
                }
                self.ends.insert(i, hour)
        self.valid = min(self.valid, bisect.bisect_left(self.ends, hours[0]))
        for experiment, changes in pending.items():
            move_terms(self.terms, self.ends, changes, first, cells=hours_of(experiment))

    def end_left(self, hour: int, first: int, pooled: Cells, hours_of: HoursOf) -> None:
        """No experiment has evidence at `hour` any more: it is no end hour (after the pending
        changes, which may need it as the end hour before a new one)."""
        self.flush(first, pooled, hours_of)
        i = bisect.bisect_left(self.ends, hour)
        if i < len(self.ends) and self.ends[i] == hour:
            del self.ends[i]
            self.terms.pop(hour, None)
            self.valid = min(self.valid, i)

    def slide(self, first: int, kept: Callable[[int], bool]) -> None:
        """The window moved: change days before `first` go, and end hours no longer `kept`."""
        self.ends = [h for h in self.ends if h // 24 >= first and kept(h)]
        self.terms = {h: {j: v for j, v in self.terms[h].items() if j >= first} for h in self.ends}
        self.values, self.valid = [], 0

    def rebuild(
        self, first: int, pooled: Cells, cells: Mapping[str, list[tuple[int, list[int]]]]
    ) -> None:
        """Made again from each experiment's cells on the window's whole days (hour order)."""
        self.ends = sorted(h for h in pooled if h // 24 >= first)
        self.terms = {h: {j: [0] * SIZE for j in range(first, h // 24 + 1)} for h in self.ends}
        self.values, self.valid, self.pending = [], 0, {}
        for own in cells.values():
            if own:
                add_terms(self.terms, self.ends, own, first)

    def statistics(self, threshold: float, first: int, pooled: Cells) -> list[list[float]]:
        """Each component's statistic at the end of every end hour: for each change day j with
        runs, the product over experiments of (1 - pi + pi * their evidence since j) (whose
        log, the experiments' terms summed, is kept per end hour and j), weighted by the runs of
        the day with runs before j (`change_point_weight`), summed over j."""
        cap = threshold * len(FALLS)
        del self.values[self.valid :]
        day_runs: dict[int, int] = {}  # the runs of each of the window's whole days
        for hour, cell in pooled.items():
            if hour // 24 >= first:
                day_runs[hour // 24] = day_runs.get(hour // 24, 0) + cell[RUNS]
        for end in self.ends[self.valid :]:
            total = [0.0] * SIZE
            before: int | None = None  # the last day with runs before j
            for j in range(first, end // 24 + 1):
                if j not in day_runs:
                    continue  # no change point: its evidence since is the next day's
                w = 1 if before is None else change_point_weight(day_runs[before], 24 * 60)
                before = j
                pair = self.terms[end][j]
                for i in range(SIZE):
                    total[i] += w * exp_units(pair[i])
            self.values.append([min(v, cap) for v in total])
        self.valid = len(self.values)
        return self.values

    def copy(self) -> SparseStatistics:
        """An independent copy (after a `flush`: nothing pending)."""
        out = SparseStatistics()
        out.terms = {h: {j: list(v) for j, v in p.items()} for h, p in self.terms.items()}
        out.ends, out.values, out.valid = list(self.ends), list(self.values), self.valid
        return out


def move_terms(
    terms: dict[int, dict[int, list[int]]],
    ends: list[int],
    changes: dict[int, list[int]],
    first: int,
    *,
    cells: Cells,
) -> None:
    """One experiment's terms in every end hour of `ends` from its first change on, for each
    change day j: from its evidence since j before `changes` to its evidence since j now
    (`cells`: its evidence per hour, the changes in). Its day sums are made here, not kept: an
    experiment's hours are few, and a suite keeps thousands of experiments."""
    by_day: dict[int, list[int]] = {}
    for hour, delta in changes.items():
        accumulate(by_day.setdefault(hour // 24, [0] * SIZE), delta)
    days: Cells = {}  # its whole days' sums; a day after an end hour's is never read for it
    for hour, values in cells.items():
        if hour // 24 >= first:
            accumulate(days.setdefault(hour // 24, [0] * SIZE), values)
    for end in ends[bisect.bisect_left(ends, min(changes)) :]:
        end_day = end // 24
        since, moved_by = [0] * SIZE, [0] * SIZE  # since j, j going down from end_day
        for h in range(end_day * 24, end + 1):
            on_hour, change = cells.get(h), changes.get(h)
            if on_hour is not None:
                accumulate(since, on_hour)
            if change is not None:
                accumulate(moved_by, change)
        sums = terms[end]
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
            pair = sums[j]
            for k, m in enumerate(moved):
                pair[k] += m


def add_terms(
    terms: dict[int, dict[int, list[int]]],
    ends: list[int],
    cells: list[tuple[int, list[int]]],
    first: int,
) -> None:
    """One experiment's terms (from its cells in the window, in hour order) into every end
    hour's of `ends`: they change only at its own cells, and are 0 for a change day after its
    last one."""
    total = [0] * SIZE  # its evidence up to the end hour
    upto: dict[int, list[int]] = {}  # before each change day
    since: dict[int, list[int]] = {}
    c = 0
    for end in ends:
        if c < len(cells) and cells[c][0] <= end:
            while c < len(cells) and cells[c][0] <= end:
                hour, values = cells[c]
                for j in range(first, hour // 24 + 1):
                    upto.setdefault(j, list(total))
                accumulate(total, values)
                c += 1
            since = {
                j: [sparse_term(t - b) if t != b else 0 for t, b in zip(total, before, strict=True)]
                for j, before in upto.items()
            }
        pairs = terms[end]
        for j, values in since.items():
            pair = pairs[j]
            for k, v in enumerate(values):
                pair[k] += v
