"""Batch replay: a file of events through the same core the streaming worker uses, giving the
final state the worker converges to for the same events."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from schemas.aggregates import TierAggregate
from schemas.common import tier_sort_key
from schemas.grade_change import GradeChange
from schemas.replay_report import IgnoredCounts, ReplayRejection, ReplayReport
from stream_app.config import CoreConfig
from stream_app.ingest import Rejection, evaluate_run
from stream_app.metrics.cross_tier import cross_tier_report
from stream_app.tier_state import TierState
from stream_app.window import AddOutcome, WindowEntry


class Replay:
    """Accumulates events; `report()` gives the final aggregates."""

    def __init__(self, config: CoreConfig) -> None:
        self.config = config
        self.tiers: dict[tuple[str, str], TierState] = {}
        self.rejected: list[ReplayRejection] = []
        self.ignored = {AddOutcome.DUPLICATE: 0, AddOutcome.LATE: 0}
        self.grade_changes: list[GradeChange] = []

    def feed(self, raw: bytes, line: int) -> None:
        """One message (one physical line of the file)."""
        result = evaluate_run(raw, self.config)
        if isinstance(result, Rejection):
            self.rejected.append(
                ReplayRejection(line=line, reason=result.reason, detail=result.detail)
            )
            return
        key = (result.experiment_id, result.tier)
        state = self.tiers.get(key)
        if state is None:
            state = self.tiers[key] = TierState.empty(*key, self.config.window_size)
        # The report aggregates each tier once, at the end: no aggregate per run.
        step = state.apply(WindowEntry.from_metrics(result), self.config, with_aggregate=False)
        if step.outcome is not AddOutcome.ADDED:
            self.ignored[step.outcome] += 1
        if step.grade_change is not None:
            self.grade_changes.append(step.grade_change)

    def feed_lines(self, lines: Iterable[bytes]) -> None:
        """Lines of a JSON-lines file; blank lines are skipped but still numbered."""
        for number, line in enumerate(lines, start=1):
            message = line[:-1] if line.endswith(b"\n") else line
            if message.strip():
                self.feed(message, number)

    def aggregates(self) -> list[TierAggregate]:
        """Every tier's aggregate, by experiment then numeric tier."""
        keys = sorted(self.tiers, key=lambda k: (k[0], tier_sort_key(k[1])))
        return [self.tiers[k].aggregate(self.config) for k in keys]

    def report(self) -> ReplayReport:
        tiers = self.aggregates()
        by_experiment: dict[str, dict[str, TierAggregate]] = defaultdict(dict)
        for agg in tiers:
            by_experiment[agg.experiment_id][agg.tier] = agg
        return ReplayReport(
            tiers=tiers,
            cross_tier=[
                cross_tier_report(exp, by_experiment[exp], self.config.baseline_tier)
                for exp in sorted(by_experiment)
            ],
            rejected=self.rejected,
            ignored=IgnoredCounts(
                duplicate=self.ignored[AddOutcome.DUPLICATE], late=self.ignored[AddOutcome.LATE]
            ),
        )


def replay_lines(lines: Iterable[bytes], config: CoreConfig) -> ReplayReport:
    """Replay JSON lines and return the final report."""
    replay = Replay(config)
    replay.feed_lines(lines)
    return replay.report()
