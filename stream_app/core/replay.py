"""Batch replay: a file of events through the same core the streaming worker uses, giving the
final state the worker converges to for the same events.

Runs are folded with the worker's own `fold_runs`, so a run the core raises on is rejected
(`processing_error`) as the worker dead-letters it. With `retire`, experiments retire by the
worker's rule in event time (docs/operations.md, 'Experiments retire')."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from schemas.aggregates import TierAggregate
from schemas.common import DropDetector, tier_sort_key
from schemas.grade_change import GradeChange
from schemas.replay_report import IgnoredCounts, ReplayRejection, ReplayReport, RetiredExperiment
from schemas.suites import SuiteTier
from stream_app.core.config import CoreConfig
from stream_app.core.ingest import Rejection, evaluate_run, processing_error
from stream_app.core.keys import split_tier_key, tier_key
from stream_app.core.retirement import IdleClock
from stream_app.core.suite.message import SuiteRun
from stream_app.core.suite.report import suite_tiers
from stream_app.core.suite.state import SuiteState
from stream_app.core.suite.window import HOUR_US
from stream_app.core.tier_state import TierState, fold_runs
from stream_app.core.window import AddOutcome, WindowEntry, from_epoch_us, to_epoch_us
from stream_app.metrics.cross_tier import cross_tier_report

SUITE_INCIDENT_US = HOUR_US
"""A suite tier dropped again within an hour (of its runs' time) of last being dropped is the
same incident: one page (SuiteTierDropped's `keep_firing_for: 1h`)."""
CHUNK_RUNS = 100_000
"""Runs folded at once: each tier is aggregated once per chunk it appears in."""


@dataclass(frozen=True, slots=True)
class Page:
    """A page the worker would have raised: the run whose arrival made `detector` page, at
    physical line `line` of the input, for its tier (TierDropped, scope "experiment") or its
    suite's tier (SuiteTierDropped, scope "suite", `experiment_id` None)."""

    line: int
    experiment_id: str | None
    tier: str
    run_id: str
    detector: DropDetector
    scope: Literal["experiment", "suite"] = "experiment"
    suite: str = ""


class Replay:
    """Accumulates events; `report()` gives the final aggregates."""

    def __init__(self, config: CoreConfig, retire: bool = False, now_us: int | None = None) -> None:
        self.config = config
        self.now_us = to_epoch_us(datetime.now(UTC)) if now_us is None else now_us
        """The event clock never passes this (the time of the replay): a run dated in the
        future has not happened yet, and must not retire every other experiment."""
        self.tiers: dict[str, TierState] = {}
        self.latest: dict[str, TierAggregate] = {}
        self.rejected: list[ReplayRejection] = []
        self.ignored = {AddOutcome.DUPLICATE: 0, AddOutcome.LATE: 0}
        self.accepted = 0
        self.ignored_lines: dict[int, AddOutcome] = {}
        self.grade_changes: list[GradeChange] = []
        self.pages: list[Page] = []
        self.suites: dict[tuple[str, str], SuiteState] = {}
        self.suites_dropped: dict[tuple[str, str], int] = {}
        """Each suite tier dropped now, or within SUITE_INCIDENT_US before its last run: when
        it was last seen dropped."""
        self._pending: list[tuple[str, WindowEntry]] = []
        self._pending_lines: list[int] = []
        self._pending_at: list[int] = []  # the clock when each pending run was read
        self.idle = IdleClock(config.experiment_idle_ttl_s if retire else 0)
        self.clock_us: int | None = None
        self.retired: list[RetiredExperiment] = []

    def feed(self, raw: bytes, line: int) -> None:
        """One message (one physical line of the file)."""
        result = evaluate_run(raw, self.config)
        if not isinstance(result, Rejection):
            try:  # the worker's path: the run's metrics as JSON values, read by the window stage
                entry = WindowEntry.from_run(result.model_dump(mode="json"))
            except Exception as exc:
                result = processing_error("window", exc)
            else:
                read_at = self._advance(entry.completed_at_us)
                self._pending.append((tier_key(result.experiment_id, result.tier), entry))
                self._pending_lines.append(line)
                self._pending_at.append(read_at)
                if len(self._pending) >= CHUNK_RUNS:
                    self.flush()
                return
        self._reject(line, result)

    def _reject(self, line: int, rejection: Rejection) -> None:
        self.rejected.append(
            ReplayRejection(line=line, reason=rejection.reason, detail=rejection.detail)
        )

    def _advance(self, at_us: int) -> int:
        """Move the event clock to a run's `completed_at`, retire what is then idle, and return
        the clock."""
        clock = min(at_us if self.clock_us is None else max(self.clock_us, at_us), self.now_us)
        self.clock_us = clock
        ttl = self.idle.ttl_us
        if ttl and self._pending_at and clock - self._pending_at[0] > ttl:
            self.flush()  # fold runs read more than a TTL ago: their experiments may be idle
        if self.idle.due(clock):
            self.flush()  # the pending runs may keep an experiment alive
            self._retire()
        return clock

    def _retire(self) -> None:
        if self.clock_us is None:
            return
        retiring = self.idle.idle(self.clock_us)
        if not retiring:
            return
        gone = set(retiring)
        changed: set[tuple[str, str]] = set()
        for key in [k for k in self.tiers if split_tier_key(k)[0] in gone]:
            experiment_id, tier = split_tier_key(key)
            for suite in self.tiers[key].feed.suites:  # its share of each suite it fed goes
                state = self.suites.get((suite, tier))
                if state is not None and state.remove(experiment_id):
                    changed.add((suite, tier))
            del self.tiers[key]
            self.latest.pop(key, None)
        for suite_tier_key in sorted(changed):
            self._suite_changed(suite_tier_key, None)
        at = from_epoch_us(self.clock_us)
        self.retired += [RetiredExperiment(experiment_id=e, at=at) for e in retiring]

    def flush(self) -> None:
        """Fold the pending runs into their windows (the worker's window fold)."""
        runs, lines, read_at = self._pending, self._pending_lines, self._pending_at
        self._pending, self._pending_lines, self._pending_at = [], [], []
        folded = fold_runs(runs, self.tiers.get, self.config)
        for failure in folded.failures:
            self._reject(lines[failure.index], processing_error("window", failure.error))
        self.rejected.sort(key=lambda r: r.line)
        self.tiers.update(folded.states)
        self.latest.update(folded.results)
        suite_runs: list[tuple[int, str, SuiteRun]] = []
        for steps in folded.steps.values():
            for index, step in steps:
                if step.outcome is not AddOutcome.ADDED:
                    self.ignored[step.outcome] += 1
                    self.ignored_lines[lines[index]] = step.outcome
                else:
                    self.accepted += 1
                    self.idle.touch(split_tier_key(runs[index][0])[0], read_at[index])
                if step.grade_change is not None:
                    self.grade_changes.append(step.grade_change)
                if step.suite_run is not None:
                    suite_runs.append((index, step.suite, step.suite_run))
                if step.page is not None:
                    key, entry = runs[index]
                    experiment_id, tier = split_tier_key(key)
                    page = Page(
                        lines[index],
                        experiment_id,
                        tier,
                        entry.run_id,
                        step.page,
                        "experiment",
                        entry.suite,
                    )
                    self.pages.append(page)
        suite_runs.sort(key=lambda r: r[0])  # in the order they were read
        for index, suite, run in suite_runs:
            tier = split_tier_key(runs[index][0])[1]
            state = self.suites.setdefault((suite, tier), SuiteState())
            if state.add(run.experiment_id, run):
                by = (lines[index], runs[index][1].run_id, run.completed_at_us)
                self._suite_changed((suite, tier), by)
        self.pages.sort(key=lambda p: p.line)

    def _suite_changed(self, key: tuple[str, str], by: tuple[int, str, int] | None) -> None:
        """A suite tier looked at after a change (a run: its line, id and time; or a
        retirement): a page when it turns dropped, unless it was dropped within the hour
        before (the running hour's statistics can dip below a threshold and cross it again
        as its runs come: SuiteTierDropped's `keep_firing_for` holds that as one alert)."""
        suite, tier = key
        status = self.suites[key].status(self.config.drop_design)
        last = self.suites_dropped.get(key)
        if by is None:  # a retirement: no run to page on; its time is the suite's newest
            leader = self.suites[key].clock.leader
            if status.dropped and leader is not None:
                self.suites_dropped.setdefault(key, (leader[0] + 1) * HOUR_US - 1)
            elif not status.dropped:
                self.suites_dropped.pop(key, None)
            return
        at = by[2]
        if status.dropped:
            if last is None or at - last > SUITE_INCIDENT_US:
                detector = max(status.evidence, key=lambda d: status.evidence[d])
                self.pages.append(Page(by[0], None, tier, by[1], detector, "suite", suite))
            self.suites_dropped[key] = max(at, last or 0)
        elif last is not None and at - last > SUITE_INCIDENT_US:
            del self.suites_dropped[key]

    def suite_tiers(self) -> list[SuiteTier]:
        """Every suite's tier, by suite then numeric tier."""
        by_suite: dict[str, dict[str, SuiteState]] = defaultdict(dict)
        for (suite, tier), state in self.suites.items():
            by_suite[suite][tier] = state
        config = self.config
        return [
            report
            for suite in sorted(by_suite)
            for report in suite_tiers(
                suite,
                by_suite[suite],
                config.drop_design,
                config.baseline_tier,
                config.interval_confidence,
            )
        ]

    def feed_lines(self, lines: Iterable[bytes]) -> None:
        """Lines of a JSON-lines file; blank lines are skipped but still numbered."""
        for number, line in enumerate(lines, start=1):
            message = line[:-1] if line.endswith(b"\n") else line
            if message.strip():
                self.feed(message, number)

    def aggregates(self) -> list[TierAggregate]:
        """Every tier's aggregate, by experiment then numeric tier."""
        self.flush()
        self._retire()
        return sorted(self.latest.values(), key=lambda a: (a.experiment_id, tier_sort_key(a.tier)))

    def report(self) -> ReplayReport:
        """The document `stream-app replay` prints: what the worker's outputs must converge to."""
        tiers = self.aggregates()
        by_experiment: dict[str, dict[str, TierAggregate]] = defaultdict(dict)
        for agg in tiers:
            by_experiment[agg.experiment_id][agg.tier] = agg
        return ReplayReport(
            tiers=tiers,
            cross_tier=[
                cross_tier_report(
                    exp,
                    by_experiment[exp],
                    self.config.baseline_tier,
                    self.config.interval_confidence,
                )
                for exp in sorted(by_experiment)
            ],
            suites=self.suite_tiers(),
            rejected=self.rejected,
            ignored=IgnoredCounts(
                duplicate=self.ignored[AddOutcome.DUPLICATE], late=self.ignored[AddOutcome.LATE]
            ),
            retired=self.retired,
        )


def replay_lines(lines: Iterable[bytes], config: CoreConfig, retire: bool = False) -> ReplayReport:
    """Replay JSON lines and return the final report; with `retire`, experiments retire by
    `experiment_idle_ttl_s` in event time."""
    replay = Replay(config, retire)
    replay.feed_lines(lines)
    return replay.report()
