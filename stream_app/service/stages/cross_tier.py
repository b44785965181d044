"""Inside the windows hop: the tier aggregates it publishes, folded into their experiment's
figures (a table) in the same batch; cross-tier reports out, acknowledged before the states that
record them are written, which are written before the windows' own (`topology.Hop.inner`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from schemas.aggregates import TierAggregate
from schemas.cross_tier import CrossTierReport
from stream_app.core.experiment_state import (
    ExperimentTiers,
    experiment_from_json,
    experiment_to_json,
    fold_aggregates,
)
from stream_app.core.keys import tier_key
from stream_app.metrics.cross_tier import TierFigures, cross_tier_report
from stream_app.service.outputs import Record
from stream_app.service.partitioning import partition_for
from stream_app.service.stages.table_stage import TableStage


class Published(NamedTuple):
    """A tier's aggregate as the windows stage published it, or its tombstone (no figures: the
    tier retired), and the message a dead letter of it carries."""

    experiment_id: str
    tier: str
    figures: TierFigures | None
    value: bytes

    @classmethod
    def aggregate(cls, aggregate: TierAggregate, value: bytes) -> Published:
        """A published aggregate (`value`: its JSON)."""
        return cls(aggregate.experiment_id, aggregate.tier, TierFigures.of(aggregate), value)

    @classmethod
    def tombstone(cls, experiment_id: str, tier: str) -> Published:
        """A retired tier."""
        return cls(experiment_id, tier, None, b"")


class CrossTierStage(TableStage[ExperimentTiers]):
    """Folds the tier aggregates of each windows batch into the experiments of the table, once
    per experiment per fold: at the end of the batch, and before a quarantine or a retirement
    in it confirms what was published so far."""

    name = "cross_tier"
    table_name = "experiment-tiers"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stored_figures: Callable[[str], ExperimentTiers] = lambda _: {}
        """An experiment's tiers as the windows table holds them (set by the windows stage
        this stage runs inside): what a state that does not load is made again from."""

    @classmethod
    def partition_key_of(cls, key: str) -> str:
        """The key is the experiment."""
        return key

    def load(self, key: str, raw: bytes) -> ExperimentTiers:
        """A stored experiment state, checked field by field."""
        return experiment_from_json(raw)

    async def fold(self, published: Sequence[Published]) -> None:
        """Fold, dead-letter what failed, hold and report each changed experiment once; an
        experiment whose last tier retired is deleted, and its report gets a tombstone."""
        if not published:
            return
        items = [(p.experiment_id, (p.tier, p.figures)) for p in published]
        settings = self.settings
        unreadable: set[str] = set()
        rebuilt: dict[str, ExperimentTiers] = {}

        def load(experiment_id: str) -> ExperimentTiers | None:
            try:
                return self.cached(experiment_id)
            except Exception:
                unreadable.add(experiment_id)
                raise

        def fresh(experiment_id: str) -> ExperimentTiers:
            """A new experiment's empty state; a quarantined one's made again from its tiers
            in the windows table, as `replay` holds it (this batch's aggregates then fold in)."""
            if experiment_id not in unreadable:
                return {}
            rebuilt[experiment_id] = self.stored_figures(experiment_id)
            return dict(rebuilt[experiment_id])  # the fold's own: a failed step stays out

        folded = fold_aggregates(
            items, load, settings.baseline_tier, settings.interval_confidence, fresh
        )

        def source(index: int) -> Record:
            p = published[index]
            partition = partition_for(p.experiment_id, settings.partitions)
            key = tier_key(p.experiment_id, p.tier).encode()
            return Record(settings.topics.aggregates, partition, None, key, p.value)

        await self.settle(folded, source)
        for experiment_id, tiers in rebuilt.items():  # none of the batch's taken: as made
            if tiers and experiment_id not in folded.states:
                folded.states[experiment_id] = tiers
                folded.results[experiment_id] = self.report(experiment_id, tiers)
        for experiment_id, tiers in folded.states.items():
            await self._keep(experiment_id, tiers, folded.results[experiment_id])

    async def _keep(
        self, experiment_id: str, tiers: ExperimentTiers, report: CrossTierReport | None
    ) -> None:
        """Hold an experiment's state and send its report; one with no tier left (no report)
        is deleted, and its report gets a tombstone."""
        key = experiment_id.encode()
        if report is None:
            await self.table.delete(key)
            self.cache.pop(key, None)
            await self.outputs.retire_experiment(experiment_id)
            return
        await self.table.put(key, experiment_to_json(tiers))
        self.cache[key] = tiers
        await self.outputs.report(report)

    async def restore(self, key: bytes, raw: bytes) -> None:
        """A stored experiment's gauges; one quarantined instead (its key deleted) is made
        again from its tiers in the windows table and reported."""
        await super().restore(key, raw)
        if self.table.get(key) is not None:
            return
        experiment_id = key.decode()
        tiers = self.stored_figures(experiment_id)
        if tiers:
            await self._keep(experiment_id, tiers, self.report(experiment_id, tiers))

    def restore_state(self, key: str, raw: bytes) -> None:
        """A stored experiment's gauges, from its report made again (an empty one has none)."""
        state = self.load(key, raw)
        if state:
            self.exporter.set_experiment(self.report(key, state))

    def report(self, experiment_id: str, state: ExperimentTiers) -> CrossTierReport:
        """An experiment's report, made from its state as the batch that stored it made it."""
        settings = self.settings
        return cross_tier_report(
            experiment_id, state, settings.baseline_tier, settings.interval_confidence
        )

    def report_of(self, experiment_id: str) -> CrossTierReport | None:
        """An experiment's latest report, as published, made again from its table record
        (the query API's answer); None when it has none or its state does not load."""
        raw = self.table.get(experiment_id.encode())
        try:
            state = None if raw is None else self.load(experiment_id, raw)
        except Exception:  # quarantined by the next batch or restoration that reads it
            return None
        return self.report(experiment_id, state) if state else None

    async def retract(self, key: str) -> None:
        """A quarantined experiment state: its report's key gets a tombstone, its gauges go."""
        await self.outputs.retire_experiment(key)

    def forget(self, lost: set[int]) -> None:
        """The lost partitions' experiments lose their gauges."""
        n = self.settings.partitions
        for experiment in list(self.exporter.aggregates.experiments):
            if partition_for(experiment, n) in lost:
                self.exporter.remove_experiment(experiment)
