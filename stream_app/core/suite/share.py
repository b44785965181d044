"""One experiment's share of a suite tier: what the suite table stores, a record each. Its
runs' evidence summed per hour (in fixed point, so that sums are exact in any order) within its own
14 days, its count of runs, its tier's incarnation (a repeat or an earlier incarnation's run is
dropped) and the outcomes of its runs (the suite's comparisons)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from stream_app.core.stored_values import is_count, is_integer
from stream_app.core.suite.evidence import SIZE
from stream_app.core.suite.message import MAX_EVIDENCE_UNITS, SuiteRun
from stream_app.core.suite.window import HOUR_US, WINDOW_HOURS
from stream_app.metrics.suite_outcomes import Outcomes

MAX_RETIRED_EPOCHS: Final = 4
"""Earlier incarnations of an experiment's tier remembered, so that a late repeat of theirs is
not taken for a new one."""
RUNS: Final = SIZE
"""Where a cell (an hour's or a day's sums) keeps its run count, after the evidence."""
CELL: Final = SIZE + 1
_LIMIT: Final = 2**63


@dataclass(slots=True)
class ExperimentShare:
    """One experiment's share of its suite's tier, the suite table's record: its tier's
    incarnation and the last sequence taken from it (a repeat is dropped), its runs, per hour
    within WINDOW_HOURS of its newest their evidence summed and their count (a cell: CELL
    numbers, the count last; `newest`: kept, not stored), and the outcomes of the runs that
    told one (the suite's comparisons)."""

    epoch: int = 0
    retired: tuple[int, ...] = ()
    seq: int = 0
    runs: int = 0
    hours: dict[int, list[int]] = field(default_factory=dict)
    newest: int | None = field(default=None, compare=False)
    outcomes: Outcomes = field(default_factory=Outcomes)

    def takes(self, run: SuiteRun) -> bool:
        """Whether `run` is new (then it is counted): a later sequence of the current
        incarnation, or the first of a new one; False for a repeat or an earlier incarnation's."""
        if run.epoch in self.retired:
            return False
        restart = False
        if self.runs:  # a history: this is a repeat, a later run or a new incarnation
            if run.epoch == self.epoch:
                if run.seq <= self.seq:
                    return False
            else:
                self.retired = (*self.retired, self.epoch)[-MAX_RETIRED_EPOCHS:]
                restart = True
        self.epoch, self.seq = run.epoch, run.seq
        self.runs += 1
        self.outcomes = self.outcomes.add(run.passed, run.composite, run.completed_at_us, restart)
        return True

    def to_state(self) -> dict[str, Any]:
        """JSON-able (keys in a fixed order)."""
        o = self.outcomes
        return {
            "e": self.epoch,
            "r": list(self.retired),
            "q": self.seq,
            "n": self.runs,
            "h": [[h, *self.hours[h]] for h in sorted(self.hours)],
            "o": [o.runs, o.passes, o.spread, o.composite, o.composite_spread, o.start, o.latest],
        }

    @classmethod
    def from_state(cls, data: Any) -> ExperimentShare:
        """Load `to_state`'s output; raises ValueError when it is not one some runs make."""
        if not isinstance(data, dict) or set(data) != {"e", "r", "q", "n", "h", "o"}:
            raise ValueError("not an experiment's share of a suite")
        epoch, retired, seq, runs, rows = (data[k] for k in ("e", "r", "q", "n", "h"))
        if not all(is_count(v, _LIMIT - 1) for v in (epoch, seq, runs)):
            raise ValueError("suite share has a bad incarnation, sequence or run count")
        if (
            not isinstance(retired, list)
            or len(retired) > MAX_RETIRED_EPOCHS
            or not all(is_count(v, _LIMIT - 1) for v in retired)
            or len(set(retired)) != len(retired)
            or epoch in retired
        ):
            raise ValueError("suite share has bad earlier incarnations")
        if not isinstance(rows, list) or len(rows) > min(runs, WINDOW_HOURS):
            raise ValueError("suite share has more hours than runs or its window")
        if bool(rows) != bool(runs):
            raise ValueError("suite share has runs and no hours, or hours and no runs")
        hours: dict[int, list[int]] = {}
        for row in rows:
            if (
                not isinstance(row, list)
                or len(row) != CELL + 1
                or not all(is_integer(v) for v in row)
                or not 0 <= row[0] < _LIMIT // HOUR_US
                or row[0] in hours
                or not 1 <= row[-1] <= runs
                # each run's log evidence is at most MAX_EVIDENCE_UNITS, either way
                or not all(abs(v) <= row[-1] * MAX_EVIDENCE_UNITS for v in row[1:-1])
            ):
                raise ValueError("suite share has a bad hour")
            hours[row[0]] = list(row[1:])
        if hours and max(hours) - min(hours) >= WINDOW_HOURS:
            raise ValueError("suite share has hours outside its window")
        if sum(cell[RUNS] for cell in hours.values()) > runs:  # ints
            raise ValueError("suite share has more runs in its hours than in all")
        outcomes = _outcomes(data["o"], runs)
        newest = max(hours) if hours else None
        if outcomes.runs != runs or (newest is not None and outcomes.latest // HOUR_US != newest):
            # every run tells an outcome, and the latest run is in the newest hour
            raise ValueError("suite share's outcomes are not those of its runs")
        return cls(epoch, tuple(retired), seq, runs, hours, newest, outcomes)

    def copy(self) -> ExperimentShare:
        """An independent copy."""
        return ExperimentShare(
            self.epoch,
            self.retired,
            self.seq,
            self.runs,
            {h: list(v) for h, v in self.hours.items()},
            self.newest,
            self.outcomes,
        )


def _outcomes(row: Any, most: int) -> Outcomes:
    """A share's stored outcomes, of at most `most` runs; raises ValueError when no runs make
    them (a composite sum of at most the runs; each run adds at most 1 to a spread, the first
    at least 1/4 to the pass rate's; its current incarnation starts at or before its latest
    run)."""
    if not isinstance(row, list) or len(row) != 7:
        raise ValueError(
            "suite share's outcomes are [runs, passes, spread, composite, composite spread, "
            "start, latest]"
        )
    runs, passes, spread, composite, composite_spread, start, latest = row
    if not is_count(runs, most) or not is_count(passes, runs):
        raise ValueError("suite share's outcomes have bad counts")
    least = 0.25 if runs else 0.0
    if type(spread) is not float or not least <= spread <= max(runs, least):
        raise ValueError("suite share's outcomes have a spread no runs make")
    if (
        type(composite) is not float
        or type(composite_spread) is not float
        or not 0 <= composite <= runs
        or not 0 <= composite_spread <= runs
    ):
        raise ValueError("suite share's outcomes have composites no runs make")
    if not is_count(latest, _LIMIT - 1) or not is_count(start, latest) or (not runs and latest):
        raise ValueError("suite share's outcomes have bad times")
    return Outcomes(runs, passes, spread, composite, composite_spread, start, latest)
