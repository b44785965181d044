"""The third hop: tier aggregates into their experiment's figures (a table), cross-tier reports
out, acknowledged before the states that record them are written."""

from __future__ import annotations

import json
from collections.abc import Sequence

from schemas.common import tier_sort_key
from stream_app.core.experiment_state import (
    ExperimentTiers,
    experiment_from_json,
    experiment_to_json,
    figures_of_aggregate,
    fold_aggregates,
)
from stream_app.core.ingest import processing_error
from stream_app.core.keys import split_tier_key
from stream_app.metrics.cross_tier import TierFigures, cross_tier_report
from stream_app.service.outputs import Record
from stream_app.service.partitioning import partition_for
from stream_app.service.stages.table_stage import TableStage


class CrossTierStage(TableStage[ExperimentTiers]):
    """Folds each batch of tier aggregates into the experiments of the table, once per experiment
    per batch."""

    name = "cross_tier"
    table_name = "experiment-tiers"

    @classmethod
    def partition_key_of(cls, key: str) -> str:
        """The key is the experiment."""
        return key

    def load(self, key: str, raw: bytes) -> ExperimentTiers:
        """A stored experiment state, checked field by field."""
        return experiment_from_json(raw)

    async def handle_batch(self, batch: Sequence[Record]) -> int:
        """Fold, dead-letter what failed, write and report each changed experiment once; an
        experiment whose last tier retired (a tombstone, which arrives as empty bytes) is
        deleted, and its report gets a tombstone."""
        items: list[tuple[str, tuple[str, TierFigures | None]]] = []
        sources: list[Record] = []
        for record in batch:
            try:
                if not record.value:
                    if record.key is None:
                        raise ValueError("a tombstone without a key")
                    experiment_id, tier = split_tier_key(record.key.decode())
                    tier_sort_key(tier)  # raises ValueError for a key that names no tier
                    items.append((experiment_id, (tier, None)))
                    sources.append(record)
                    continue
                aggregate = json.loads(record.value)
                figures = figures_of_aggregate(aggregate)
                items.append((str(aggregate["experiment_id"]), (str(aggregate["tier"]), figures)))
            except Exception as exc:
                await self.outputs.reject(record, processing_error(self.name, exc))
                continue
            sources.append(record)
        folded = fold_aggregates(
            items, self.cached, self.settings.baseline_tier, self.settings.interval_confidence
        )
        await self.settle(folded, sources.__getitem__)
        for experiment_id, tiers in folded.states.items():
            key = experiment_id.encode()
            report = folded.results[experiment_id]
            if report is None:
                await self.table.delete(key)
                self.cache.pop(key, None)
                await self.outputs.retire_experiment(experiment_id)
                continue
            await self.table.put(key, experiment_to_json(tiers))
            self.cache[key] = tiers
            await self.outputs.report(report)
        return len(batch)

    def restore_state(self, key: str, raw: bytes) -> None:
        """A stored experiment's gauges, from its report made again (an empty one has none)."""
        state = self.load(key, raw)
        if state:
            settings = self.settings
            report = cross_tier_report(
                key, state, settings.baseline_tier, settings.interval_confidence
            )
            self.exporter.set_experiment(report)

    async def retract(self, key: str) -> None:
        """A quarantined experiment state: its report's key gets a tombstone, its gauges go."""
        await self.outputs.retire_experiment(key)

    def forget(self, lost: set[int]) -> None:
        """The lost partitions' experiments lose their gauges."""
        n = self.settings.partitions
        for experiment in list(self.exporter.aggregates.experiments):
            if partition_for(experiment, n) in lost:
                self.exporter.remove_experiment(experiment)
