"""The second hop: runs into their tier's rolling window (a table); aggregates, grade changes and
suite evidence out, and each touched experiment's cross-tier report, made by the cross-tier
stage inside this hop from the aggregates it publishes (`Hop.inner`). Outputs converge to
`replay` through any crash by one rule: every output of a batch (aggregates, reports, grade
changes, suite runs) is acknowledged before the states that record it are written
(`Outputs.confirm`); a crash in between redelivers the batch, which sends them again (consumers
keep the latest message per key; the suite drops repeats), so no recovery re-publishes. Each
state is stored with its aggregate (`core.stored_aggregate`), from which a restarted worker
restores the tier's gauges as stored."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from schemas.aggregates import TierAggregate
from schemas.common import EVERY_TIER
from schemas.run_bundle import BUNDLE_MAX_RUNS, BUNDLE_VERSION
from stream_app.core.ingest import processing_error
from stream_app.core.keyed_batch import key_parts
from stream_app.core.keys import split_tier_key, tier_key
from stream_app.core.retirement import IdleClock
from stream_app.core.stored_aggregate import fingerprint, stored_aggregate, with_aggregate
from stream_app.core.tier_state import (
    STATE_VERSION,
    TierState,
    fold_runs,
    suites_fed,
    touched_of,
)
from stream_app.core.window import AddOutcome, WindowEntry, to_epoch_us
from stream_app.metrics.cross_tier import TierFigures
from stream_app.service.outputs import Record
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import MESSAGE_OVERHEAD_BYTES
from stream_app.service.stages.cross_tier import CrossTierStage, Published
from stream_app.service.stages.suite_forwarding import SuiteForwarding
from stream_app.service.stages.table_stage import HopStage

log = logging.getLogger(__name__)


def runs_of(value: bytes) -> list[Any]:
    """The runs of a message of the re-keyed topic, a `RunBundle`."""
    decoded = json.loads(value)
    if not isinstance(decoded, dict) or "runs" not in decoded:
        raise ValueError("not a bundle of runs")
    runs = decoded["runs"]
    if decoded.get("v") != BUNDLE_VERSION:
        raise ValueError(f"unknown bundle version {decoded.get('v')!r}")
    if not isinstance(runs, list):
        raise TypeError(f"a bundle's runs must be a list, not {type(runs).__name__}")
    if len(runs) > BUNDLE_MAX_RUNS:
        raise ValueError(f"a bundle of {len(runs)} runs, over {BUNDLE_MAX_RUNS}")
    return runs


def run_record(record: Record, run: Any) -> Record:
    """One run as a message of its own, for its dead letter: it keeps the bundle's position and
    key, with its own JSON as the payload."""
    return record._replace(value=json.dumps(run).encode())


class WindowsStage(HopStage[TierState]):
    """Folds each batch of runs into the tier windows of the table, once per key per batch, and
    retires the experiments that accepted no run for `experiment_idle_ttl_s`."""

    name = "window"
    table_name = "tier-windows"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.idle = IdleClock(self.settings.experiment_idle_ttl_s)
        """When each experiment this worker owns last accepted a run (processing time)."""
        self.lagging: Callable[[], bool] = lambda: False
        """Whether this worker is behind its input (set by the app from the consumer lag): a
        backlog, after a restart say, is not idleness, so nothing retires until it is read."""
        self.checked: tuple[TierState | None, TierAggregate | None] = (None, None)
        """The last state `load` checked, and its aggregate: a gauge restoration publishes that
        one rather than aggregating each tier twice."""
        self.made_by = fingerprint(self.settings)
        """What stored aggregates this worker restores gauges from as they are."""
        self.tracked: set[str] = set()
        """Experiments of partitions not restored yet whose every stored tier is in the idle
        clock (`track`)."""
        self.reports: CrossTierStage | None = None
        """The stage inside this hop that folds its aggregates into cross-tier reports."""
        self.published: list[Published] = []
        """Aggregates and tombstones published since the reports stage last folded them."""

    def feed(self, reports: CrossTierStage) -> None:
        """Run `reports` inside this hop: it folds every aggregate this stage publishes, in the
        same batch, under the same lock (its writes share this stage's outputs)."""
        self.reports = reports
        self.lock = reports.lock
        reports.stored_figures = self.figures_of

    async def publish(self, aggregate: TierAggregate, value: bytes) -> None:
        """Send a tier's aggregate (its gauges too), for the reports stage to fold."""
        await self.outputs.aggregate(aggregate, value)
        self.published.append(Published.aggregate(aggregate, value))

    async def withdraw(self, experiment_id: str, tier: str) -> None:
        """Send a tier's tombstone, for the reports stage to drop the tier."""
        await self.outputs.retire_tier(experiment_id, tier)
        self.published.append(Published.tombstone(experiment_id, tier))

    async def confirm(self, *, states: bool = True) -> None:
        """The reports stage folds what was published first: its reports are outputs of this
        batch too, and its states are written before this stage's (`build_stages`)."""
        published, self.published = self.published, []
        if self.reports is not None:
            await self.reports.fold(published)
        await super().confirm(states=states)

    def rollback(self) -> None:
        """The reports stage's held writes and cache go with this stage's."""
        super().rollback()
        self.published.clear()
        if self.reports is not None:
            self.reports.rollback()

    @classmethod
    def partition_key_of(cls, key: str) -> str:
        """A tier key's experiment."""
        return split_tier_key(key)[0]

    def load(self, key: str, raw: bytes) -> TierState:
        """A stored tier state, checked to aggregate: a state that cannot is caught here, once,
        and quarantined, instead of failing every later run of its tier."""
        experiment_id, tier = split_tier_key(key)
        settings = self.settings
        state = TierState.from_json(
            experiment_id, tier, settings.window_size, raw, settings.drop_design
        )
        self.checked = (state, state.aggregate(self.settings))
        return state

    async def _read(
        self, batch: Sequence[Record]
    ) -> tuple[list[tuple[str, WindowEntry]], list[tuple[Record, Any]], int]:
        """The batch's runs (tier key, entry), each one's message (message, run), and
        the events it held (runs, and messages that held none we could read); what cannot be
        read is dead-lettered."""
        runs: list[tuple[str, WindowEntry]] = []
        sources: list[tuple[Record, Any]] = []
        events = 0
        for record in batch:
            try:
                items = runs_of(record.value)
            except Exception as exc:
                events += 1
                await self.outputs.reject(record, processing_error(self.name, exc))
                continue
            events += len(items)
            for run in items:
                try:
                    key = tier_key(run["experiment_id"], run["tier"])
                    entry = WindowEntry.from_run(run)
                except Exception as exc:
                    await self.outputs.reject(
                        run_record(record, run), processing_error(self.name, exc)
                    )
                    continue
                runs.append((key, entry))
                sources.append((record, run))
        return runs, sources, events

    async def handle_batch(self, batch: Sequence[Record]) -> int:
        """Retire what is idle, then fold the batch's runs a part at a time (`key_parts`: at
        most `batch_max_keys` tiers, whole experiments), each part confirmed before the next
        and the last by `handle` (outputs acknowledged, then states written). A crash between
        two parts redelivers the batch, whose runs already in a window are ignored."""
        runs, sources, events = await self._read(batch)
        now_us = to_epoch_us(datetime.now(UTC))
        if any(record.partition not in self.restored for record in batch):
            n = self.settings.partitions
            for experiment in {split_tier_key(key)[0] for key, _ in runs}:
                if partition_for(experiment, n) not in self.restored:  # not in the clock yet
                    self.track(experiment, now_us)
        if self.idle.due(now_us) and not self.lagging():
            # A run for an experiment idle for the TTL starts it fresh, even between two
            # checks of the timer: what `replay --retire` does.
            await self._retire(now_us)
        parts = key_parts(runs, self.partition_key_of, self.settings.batch_max_keys)
        whole = len(parts) == 1  # the usual batch: its runs as they are, not copied
        for number, indices in enumerate(parts):
            if number:  # the part before: its outputs acknowledged, then its states written
                await self.confirm()
            await self._fold_part(
                runs if whole else [runs[i] for i in indices],
                sources if whole else [sources[i] for i in indices],
                now_us,
            )
        self.exporter.experiments.set(len(self.idle.last))
        return events

    async def _fold_part(
        self, runs: list[tuple[str, WindowEntry]], sources: list[tuple[Record, Any]], now_us: int
    ) -> None:
        """Fold a part of a batch (`key_parts`), dead-letter what failed, send its grade
        changes and suite runs, hold its states and publish each changed tier's aggregate."""
        folded = fold_runs(runs, self.cached, self.settings)
        await self.settle(folded, lambda i: run_record(*sources[i]))
        added: dict[str, list[int]] = {}  # completed_at of each added run, per key
        forwarding = SuiteForwarding(self.outputs)
        for key, steps in folded.steps.items():
            for index, step in steps:
                if step.outcome is not AddOutcome.ADDED:
                    self.exporter.ignored.labels(reason=step.outcome.value).inc()
                    continue
                added.setdefault(key, []).append(runs[index][1].completed_at_us)
                if step.grade_change is not None:
                    await self.outputs.grade_change(step.grade_change)
                if step.suite_run is not None and key in folded.states:
                    forwarding.run(step.suite, split_tier_key(key)[1], step.suite_run)
                if step.page is not None:  # the gauge pages; the log says which run did it
                    log.warning(
                        "%s dropped: the %s detector paged on run %r",
                        key,
                        step.page.replace("_", " "),
                        runs[index][1].run_id,
                    )
        await forwarding.send()  # with the aggregates, acknowledged before the states
        for key, state in folded.states.items():
            key_bytes = key.encode()
            state.touched_us = now_us
            aggregate = folded.results[key]
            value = aggregate.model_dump_json().encode()
            await self.table.put(key_bytes, self.stored(state, value))
            self.cache[key_bytes] = state
            self.idle.touch(state.experiment_id, now_us)
            completed = added.get(key, [])
            self.exporter.accepted.inc(len(completed))
            for at_us in completed:
                self.exporter.run_age.observe(max(now_us - at_us, 0) / 1e6)
            await self.publish(aggregate, value)

    def stored(self, state: TierState, aggregate: bytes) -> bytes:
        """A state's changelog record: with its aggregate when both fit the broker's message
        limit together (each alone always does; a record without one re-derives it)."""
        state_json = state.to_json()
        record = with_aggregate(state_json, aggregate, self.made_by)
        limit = self.settings.broker_max_message_bytes - MESSAGE_OVERHEAD_BYTES
        return record if len(record) <= limit else state_json

    def track(self, experiment: str, now_us: int) -> None:
        """Put an experiment whose partition's gauges are not restored yet in the idle clock, at
        the latest time any of its stored tiers was touched: all its tiers at once (point reads
        of its 100 possible tier keys), so that its run is judged idle or not as `replay`
        judges it. Once per experiment, until its partition is restored."""
        if experiment in self.tracked:
            return
        self.tracked.add(experiment)
        for _, raw in self._stored_tiers(experiment):
            try:
                touched = touched_of(json.loads(raw))
            except (ValueError, RecursionError):
                touched = None
            self.idle.touch(experiment, touched or now_us)

    def _stored_tiers(self, experiment: str) -> Iterator[tuple[bytes, bytes]]:
        """The stored tier keys of an experiment and their records, by point reads of its 100
        possible tier keys: a scan would read every record of the table from disk."""
        for tier in EVERY_TIER:
            key = tier_key(experiment, tier).encode()
            raw = self.table.get(key)
            if raw is not None:
                yield key, raw

    def _stored(
        self, key: str, raw: bytes
    ) -> tuple[TierAggregate | None, bytes | None, int | None]:
        """The aggregate stored with a tier's state, its bytes and the state's touch time, if
        they can be used as they are; (None, None, None) otherwise."""
        try:
            record: Any = json.loads(raw)
        except (ValueError, RecursionError):
            return None, None, None
        value = stored_aggregate(record, self.made_by)
        try:
            aggregate = None if value is None else TierAggregate.model_validate_json(value)
        except ValueError:
            return None, None, None
        touched = touched_of(record)
        if (
            aggregate is None
            or aggregate.model_dump_json().encode() != value
            or tier_key(aggregate.experiment_id, aggregate.tier) != key
            or record.get("v") != STATE_VERSION
            or not isinstance(record.get("window"), list)
            or (touched is None and "at" in record)
        ):  # what the stored aggregate leans on is not sound
            return None, None, None
        return aggregate, value, touched

    def aggregate_of(self, experiment_id: str, tier: str) -> TierAggregate | None:
        """A tier's latest aggregate, as published, read from its table record (the query
        API's answer): the one stored with its state, else made again from the state (a record
        too large to carry both); None when there is none or it does not load."""
        key = tier_key(experiment_id, tier)
        raw = self.table.get(key.encode())
        return None if raw is None else self._aggregate_in(key, raw)

    def _aggregate_in(self, key: str, raw: bytes) -> TierAggregate | None:
        """The aggregate a tier's record stands for (`aggregate_of`)."""
        aggregate = self._stored(key, raw)[0]
        if aggregate is not None:
            return aggregate
        try:
            self.load(key, raw)  # checked by aggregating it
        except Exception:  # quarantined by the next batch or restoration that reads it
            return None
        return self.checked[1]

    def figures_of(self, experiment_id: str) -> dict[str, TierFigures]:
        """What the cross-tier report needs of each of an experiment's stored tiers, from the
        aggregates as published (`aggregate_of`): what a quarantined experiment state is made
        again from."""
        figures: dict[str, TierFigures] = {}
        for key, raw in self._stored_tiers(experiment_id):
            name = key.decode()
            aggregate = self._aggregate_in(name, raw)
            if aggregate is not None:
                figures[split_tier_key(name)[1]] = TierFigures.of(aggregate)
        return figures

    async def restore(self, key: bytes, raw: bytes) -> None:
        """A stored tier's gauges from the aggregate stored with it, as published, if this
        worker's format and settings made it, it reads back to the same bytes, names its tier,
        and its state is of this version (the rest of the state is checked when its tier's
        next run loads it); and its experiment tracked for retirement from when it was last
        touched. Any other state is loaded (a state that cannot be is quarantined), and its
        aggregate derived again, re-published and stored anew."""
        name = key.decode()
        aggregate, value, touched = self._stored(name, raw)
        if aggregate is None:
            try:
                state = self.load(name, raw)
            except Exception as exc:
                await self.quarantine(key, exc)
                return
            aggregate, touched = self.checked[1] or state.aggregate(self.settings), state.touched_us
            value = aggregate.model_dump_json().encode()
            await self.publish(aggregate, value)  # its gauges too
            await self.table.put(key, self.stored(state, value))
        else:
            self.exporter.set_tier(aggregate)
        self.idle.touch(aggregate.experiment_id, touched or to_epoch_us(datetime.now(UTC)))

    async def restore_gauges(self, partitions: set[int], generation: int) -> int:
        """Every stored tier's gauges, and the count of experiments once they are all back."""
        count = await super().restore_gauges(partitions, generation)
        self.exporter.experiments.set(len(self.idle.last))
        n = self.settings.partitions
        self.tracked = {e for e in self.tracked if partition_for(e, n) not in partitions}
        return count

    def forget(self, lost: set[int]) -> None:
        """The lost partitions' tiers lose their gauges, and their experiments are no longer
        this worker's to retire."""
        n = self.settings.partitions
        for experiment, tier in list(self.exporter.aggregates.tiers):
            if partition_for(experiment, n) in lost:
                self.exporter.remove_tier(experiment, tier)
        for experiment in [e for e in self.idle.last if partition_for(e, n) in lost]:
            self.idle.forget(experiment)
        self.tracked = {e for e in self.tracked if partition_for(e, n) not in lost}
        self.exporter.experiments.set(len(self.idle.last))

    async def retract(self, key: str) -> None:
        """A quarantined tier: a tombstone for its aggregate (the cross-tier stage drops the
        tier), and its gauges go. Its experiment stays tracked by its other tiers."""
        experiment_id, tier = split_tier_key(key)
        await self.withdraw(experiment_id, tier)
        self.exporter.remove_tier(experiment_id, tier)

    async def retire_idle(self, now_us: int) -> list[str]:
        """Retire every owned experiment idle for longer than the TTL (the timer's check; a
        batch checks too, before its runs), unless this worker is behind its input. Returns
        the retired experiments."""
        async with self.locked():
            retired = [] if self.lagging() else await self._retire(now_us)
            self.exporter.experiments.set(len(self.idle.last))
            return retired

    def _suites_of(self, key: bytes) -> tuple[str, ...]:
        """The suites a stored tier's runs went to, read from its record alone (none when it
        cannot be read: its shares then stay in their suites, still counted among their
        experiments, while their evidence leaves the window 14 days after their last run)."""
        state = self.cache.use(key)
        if state is not None:
            return state.feed.suites
        return suites_fed(self.table.get(key) or b"")

    async def _retire(self, now_us: int) -> list[str]:
        """A tombstone for each tier of each idle experiment on the aggregates topic (the
        cross-tier stage then retires the experiment), acknowledged before the table entries
        are deleted (tombstones on the changelog), so that a crash in between retires it again
        after recovery; then its gauges go. A revocation waits for the deletes (`revoke` takes
        the lock this holds), so whoever owns the partitions next reads them from the
        changelog."""
        n = self.settings.partitions
        retiring = set(  # an experiment known by a part of its tiers is not judged yet
            self.idle.idle(
                now_us, lambda e: partition_for(e, n) in self.restored or e in self.tracked
            )
        )
        if not retiring:
            return []
        generation = self.generation
        keys = [key for e in sorted(retiring) for key, _ in self._stored_tiers(e)]
        forwarding = SuiteForwarding(self.outputs)
        for key in keys:
            experiment_id, tier = split_tier_key(key.decode())
            await self.withdraw(experiment_id, tier)
            forwarding.retire(self._suites_of(key), tier, experiment_id)
        await forwarding.send()
        await self.confirm()
        if self.generation != generation:
            return []
        for key in keys:
            await self.table.delete(key)
            self.cache.pop(key, None)
            self.exporter.remove_tier(*split_tier_key(key.decode()))
        await self.confirm()
        self.exporter.retired.inc(len(retiring))
        self.tracked -= retiring
        return sorted(retiring)
