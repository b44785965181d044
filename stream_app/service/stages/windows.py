"""The second hop: runs into their tier's rolling window (a table), aggregates and grade changes
out. Outputs converge to `replay` through any crash by two rules: a batch's grade changes are
acknowledged by the broker before the states that record them are written (a crash in between
re-sends the same changes, never loses one), and after every recovery the aggregate of every
owned key is re-published (an output lost between its changelog write and its own send is
restored; consumers keep the latest message per key)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, MutableMapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from stream_app.core.ingest import processing_error
from stream_app.core.keys import split_tier_key, tier_key
from stream_app.core.tier_state import TierState, fold_runs
from stream_app.core.window import AddOutcome, WindowEntry, to_epoch_us
from stream_app.service.exporter import Exporter
from stream_app.service.outputs import Outputs, Record
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import Settings


class WindowsStage:
    """Folds each batch of runs into the tier windows of the table, once per key per batch."""

    name: Final = "window"
    table_name: Final = "tier-windows"

    def __init__(
        self,
        table: MutableMapping[bytes, bytes],
        changelog: str,
        settings: Settings,
        outputs: Outputs,
        metrics: Exporter,
    ) -> None:
        self.table = table
        self.changelog = changelog
        self.settings = settings
        self.outputs = outputs
        self.metrics = metrics
        self.cache: dict[bytes, TierState] = {}
        """Decoded states of the keys this worker handles, so a batch does not re-read the table;
        the table (and its changelog) stays the truth: dropped on rebalance and failure."""

    def load(self, key: str, raw: bytes) -> TierState:
        """A stored tier state, checked to aggregate: a state that cannot is caught here, once,
        and quarantined, instead of failing every later run of its tier."""
        experiment_id, tier = split_tier_key(key)
        state = TierState.from_json(experiment_id, tier, self.settings.window_size, raw)
        state.aggregate(self.settings)
        return state

    def _cached(self, key: str) -> TierState | None:
        key_bytes = key.encode()
        state = self.cache.get(key_bytes)
        if state is not None:
            return state
        raw = self.table.get(key_bytes)
        return None if raw is None else self.load(key, raw)

    async def handle(self, batch: Sequence[Record]) -> None:
        """See `_handle`; a batch that fails drops the cache, which may be ahead of the table."""
        try:
            await self._handle(batch)
        except BaseException:
            self.drop_cache()
            raise

    async def _handle(self, batch: Sequence[Record]) -> None:
        """One batch: fold, dead-letter what failed, acknowledge grade changes, then write the
        states and publish each changed tier's aggregate once."""
        runs: list[tuple[str, WindowEntry]] = []
        sources: list[Record] = []
        for record in batch:
            try:
                run = json.loads(record.value)
                key = tier_key(run["experiment_id"], run["tier"])
                entry = WindowEntry.from_run(run)
            except Exception as exc:
                await self.outputs.reject(record, processing_error(self.name, exc))
                continue
            runs.append((key, entry))
            sources.append(record)
        folded = fold_runs(runs, self._cached, self.settings)
        for failure in folded.failures:
            await self.outputs.reject(
                sources[failure.index], processing_error(self.name, failure.error)
            )
        for bad in folded.quarantined:
            key_bytes = bad.key.encode()
            await self.outputs.quarantine(
                self.table, self.table_name, self.changelog, key_bytes, bad.error
            )
        pending: list[Awaitable[Any]] = []
        added: dict[str, int] = {}
        for key, steps in folded.steps.items():
            if key not in folded.states:
                self.cache.pop(key.encode(), None)  # its cached state may be ahead of the table
            for _, step in steps:
                if step.outcome is not AddOutcome.ADDED:
                    self.metrics.ignored.labels(reason=step.outcome.value).inc()
                    continue
                added[key] = added.get(key, 0) + 1
                if step.grade_change is not None:
                    pending.append(await self.outputs.grade_change(step.grade_change))
        if pending:
            await asyncio.gather(*pending)
        for key, state in folded.states.items():
            key_bytes = key.encode()
            self.table[key_bytes] = state.to_json()
            self.cache[key_bytes] = state
            self.metrics.accepted.labels(state.experiment_id, state.tier).inc(added.get(key, 0))
            await self.outputs.aggregate(folded.results[key])
        now_us = to_epoch_us(datetime.now(UTC))
        for key, entry in runs:
            if key in folded.states:
                self.metrics.run_age.observe(max(now_us - entry.completed_at_us, 0) / 1e6)

    async def on_recover(self, owned: set[int]) -> int:
        """Re-publish every owned tier's aggregate; quarantine a stored state that cannot be
        loaded or aggregated, so that no key can keep the worker unready. Returns the count."""
        self.drop_cache()
        count = 0
        for key_bytes, raw in list(self.table.items()):
            if raw is None:
                continue
            try:
                key = key_bytes.decode()
                if partition_for(key, self.settings.partitions) not in owned:
                    continue
                aggregate = self.load(key, raw).aggregate(self.settings)
            except Exception as exc:
                await self.outputs.quarantine(
                    self.table, self.table_name, self.changelog, key_bytes, exc
                )
                continue
            await self.outputs.aggregate(aggregate)
            count += 1
        return count

    def on_revoked(self, lost: set[int]) -> None:
        """Drop the gauges of every tier whose partition this worker no longer owns."""
        self.drop_cache()
        for key_bytes in list(self.table.keys()):
            key = key_bytes.decode(errors="replace")
            if partition_for(key, self.settings.partitions) in lost:
                self.metrics.remove_tier(*split_tier_key(key))

    def drop_cache(self) -> None:
        """Forget the decoded states: the next batch reads the table."""
        self.cache.clear()
