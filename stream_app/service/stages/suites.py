"""The fourth hop: each run's suite evidence into its suite's detectors (a table), the suite's
tier out. Its input comes from every partition of the windows hop, in an order no replay
reproduces; its state is a function of the set of runs (core.suite_state), so it still equals
`replay`. Re-published after every recovery, like the aggregates."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from stream_app.core.ingest import processing_error
from stream_app.core.keys import split_tier_key, suite_key
from stream_app.core.suite_state import SuiteRun, SuiteState, fold_suite_runs, suite_tier
from stream_app.service.outputs import Record
from stream_app.service.stages.table_stage import TableStage


class SuitesStage(TableStage[SuiteState]):
    """Folds each batch of suite runs into the suites of the table, once per suite tier."""

    name = "suite"
    table_name = "suite-states"

    @classmethod
    def experiment_of(cls, key: str) -> str:
        """A suite tier's key is partitioned by its suite."""
        return split_tier_key(key)[0]

    def load(self, key: str, raw: bytes) -> SuiteState:
        """A stored suite state, checked field by field."""
        return SuiteState.from_json(raw)

    async def handle_batch(self, batch: Sequence[Record]) -> int:
        """Fold, dead-letter what failed, then write each changed suite tier and publish it."""
        runs: list[tuple[str, SuiteRun]] = []
        sources: list[Record] = []
        for record in batch:
            try:
                run = SuiteRun.from_json(record.value)
            except Exception as exc:
                await self.outputs.reject(record, processing_error(self.name, exc))
                continue
            runs.append((suite_key(run.suite, run.tier), run))
            sources.append(record)
        folded = fold_suite_runs(runs, self.cached, self.settings.drop_design)
        await self.settle(folded, sources.__getitem__)
        for key, state in folded.states.items():
            key_bytes = key.encode()
            await self.table.put(key_bytes, state.to_json())
            self.cache[key_bytes] = state
            await self.outputs.suite_tier(folded.results[key])
        return len(batch)

    def republish(self, key: str, state: SuiteState) -> Callable[[], Awaitable[None]] | None:
        """A recovered suite tier re-publishes what it shows."""
        report = suite_tier(*split_tier_key(key), state, self.settings.drop_design)
        return lambda: self.outputs.suite_tier(report)

    async def retract(self, key: str) -> None:
        """A quarantined suite tier: a tombstone for its key, and its gauges go."""
        await self.outputs.retire_suite_tier(*split_tier_key(key))

    def forget(self, key: str, raw: bytes) -> None:
        """A lost suite tier's gauges go."""
        self.exporter.remove_suite(*split_tier_key(key))
