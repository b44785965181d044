"""The third hop: tier aggregates into their experiment's medians (a table), cross-tier reports
out. Re-published after every recovery, like the aggregates."""

from __future__ import annotations

import json
from collections.abc import MutableMapping, Sequence
from typing import Final

from stream_app.core.experiment_state import (
    ExperimentTiers,
    experiment_from_json,
    experiment_to_json,
    fold_aggregates,
    medians_of_aggregate,
)
from stream_app.core.ingest import processing_error
from stream_app.metrics.cross_tier import TierMedians, cross_tier_report_from_medians
from stream_app.service.exporter import Exporter
from stream_app.service.outputs import Outputs, Record
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import Settings


class CrossTierStage:
    """Folds each batch of tier aggregates into the experiments of the table, once per experiment
    per batch."""

    name: Final = "cross_tier"
    table_name: Final = "experiment-tiers"

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
        self.cache: dict[bytes, ExperimentTiers] = {}

    def _cached(self, experiment_id: str) -> ExperimentTiers | None:
        key = experiment_id.encode()
        tiers = self.cache.get(key)
        if tiers is not None:
            return tiers
        raw = self.table.get(key)
        return None if raw is None else experiment_from_json(raw)

    async def handle(self, batch: Sequence[Record]) -> None:
        """See `_handle`; a batch that fails drops the cache, which may be ahead of the table."""
        try:
            await self._handle(batch)
        except BaseException:
            self.drop_cache()
            raise

    async def _handle(self, batch: Sequence[Record]) -> None:
        """One batch: fold, dead-letter what failed, write and report each changed experiment."""
        items: list[tuple[str, tuple[str, TierMedians]]] = []
        sources: list[Record] = []
        for record in batch:
            try:
                aggregate = json.loads(record.value)
                medians = medians_of_aggregate(aggregate)
                items.append((str(aggregate["experiment_id"]), (str(aggregate["tier"]), medians)))
            except Exception as exc:
                await self.outputs.reject(record, processing_error(self.name, exc))
                continue
            sources.append(record)
        folded = fold_aggregates(items, self._cached, self.settings.baseline_tier)
        for failure in folded.failures:
            await self.outputs.reject(
                sources[failure.index], processing_error(self.name, failure.error)
            )
        for bad in folded.quarantined:
            await self.outputs.quarantine(
                self.table, self.table_name, self.changelog, bad.key.encode(), bad.error
            )
        for experiment_id in folded.steps:
            if experiment_id not in folded.states:
                self.cache.pop(experiment_id.encode(), None)
        for experiment_id, tiers in folded.states.items():
            key = experiment_id.encode()
            self.table[key] = experiment_to_json(tiers)
            self.cache[key] = tiers
            await self.outputs.report(folded.results[experiment_id])

    async def on_recover(self, owned: set[int]) -> int:
        """Re-publish every owned experiment's report; quarantine a state that cannot load."""
        self.drop_cache()
        count = 0
        for key_bytes, raw in list(self.table.items()):
            if raw is None:
                continue
            try:
                experiment_id = key_bytes.decode()
                if partition_for(experiment_id, self.settings.partitions) not in owned:
                    continue
                tiers = experiment_from_json(raw)
                report = (
                    cross_tier_report_from_medians(
                        experiment_id, tiers, self.settings.baseline_tier
                    )
                    if tiers
                    else None
                )
            except Exception as exc:
                await self.outputs.quarantine(
                    self.table, self.table_name, self.changelog, key_bytes, exc
                )
                continue
            if report is not None:
                await self.outputs.report(report)
                count += 1
        return count

    def on_revoked(self, lost: set[int]) -> None:
        """Drop the gauges of every experiment whose partition this worker no longer owns."""
        self.drop_cache()
        for key_bytes, raw in list(self.table.items()):
            experiment_id = key_bytes.decode(errors="replace")
            if raw is None or partition_for(experiment_id, self.settings.partitions) not in lost:
                continue
            try:
                tiers = experiment_from_json(raw)
            except ValueError:
                continue
            self.metrics.remove_experiment(experiment_id, list(tiers))

    def drop_cache(self) -> None:
        """Forget the decoded states: the next batch reads the table."""
        self.cache.clear()
