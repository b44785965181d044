"""The pooled detector (every experiment fell, the change at any hour of the window): its inputs
and its Shiryaev-Roberts statistic after each hour. docs/statistics.md, 'Suites'."""

from __future__ import annotations

import bisect
from collections.abc import Callable

from stream_app.core.drop_detector import FALLS
from stream_app.core.suite.arithmetic import accumulate, change_point_weight, exp_units
from stream_app.core.suite.evidence import SIZE, Evidence
from stream_app.core.suite.share import CELL, RUNS


class PooledStatistics:
    """The pooled detector's inputs (every experiment fell, the change at any hour of the
    window): the window's evidence summed per hour over its experiments, and how many
    experiments have some at each hour; and its statistic after each of those hours."""

    def __init__(self) -> None:
        self.sums: dict[int, list[int]] = {}
        """Per hour with evidence in the window: the experiments' cells summed."""
        self.experiments: dict[int, int] = {}
        """Per hour of `sums`: how many experiments have evidence there."""
        self.hours: list[int] = []
        """The hours of `sums` in order, for `values`."""
        self.values: list[list[float]] = []
        """The statistic after each hour, up to `valid` of them."""
        self.valid: int | None = None
        """How many `values` are up to date (None: `hours` too must be made again)."""

    def add(self, hour: int, values: Evidence | list[int]) -> None:
        """A cell's change at `hour` (in the window) into its sum."""
        accumulate(self.sums.setdefault(hour, [0] * CELL), values)
        if self.valid is None:
            return
        i = bisect.bisect_left(self.hours, hour)
        if i == len(self.hours) or self.hours[i] != hour:
            self.hours.insert(i, hour)
        self.valid = min(self.valid, i)

    def enter(self, hour: int) -> None:
        """One more experiment has evidence at `hour`."""
        self.experiments[hour] = self.experiments.get(hour, 0) + 1

    def leave(self, hour: int) -> bool:
        """One experiment fewer has evidence at `hour`; True when none is left (the hour goes)."""
        self.experiments[hour] -= 1
        if self.experiments[hour]:
            return False
        del self.experiments[hour], self.sums[hour]
        self.valid = None
        return True

    def slide(self, kept: Callable[[int], bool]) -> None:
        """The window moved: the hours not `kept` go."""
        self.sums = {h: v for h, v in self.sums.items() if kept(h)}
        self.experiments = {h: n for h, n in self.experiments.items() if kept(h)}
        self.valid = None

    def statistics(self, threshold: float) -> list[list[float]]:
        """Each component's Shiryaev-Roberts statistic at the end of every hour with evidence in
        the window, in time order: R <- (w + R) exp(the hour's summed log e), the change point
        at the hour's start weighing w, the runs of the hour with runs before it
        (`change_point_weight`)."""
        if self.valid is None:
            self.hours, self.values, self.valid = sorted(self.sums), [], 0
        cap = threshold * len(FALLS)
        del self.values[self.valid :]
        r = self.values[-1] if self.values else [0.0] * SIZE
        for k in range(self.valid, len(self.hours)):
            w = change_point_weight(self.sums[self.hours[k - 1]][RUNS], 60) if k else 1
            logs = self.sums[self.hours[k]]
            r = [min((w + r[i]) * exp_units(logs[i]), cap) for i in range(SIZE)]
            self.values.append(r)
        self.valid = len(self.values)
        return self.values

    def copy(self) -> PooledStatistics:
        """An independent copy."""
        out = PooledStatistics()
        out.sums = {h: list(v) for h, v in self.sums.items()}
        out.experiments = dict(self.experiments)
        out.hours, out.values, out.valid = list(self.hours), list(self.values), self.valid
        return out
