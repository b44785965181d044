"""The fourth hop: each run's suite evidence and outcome into its suite's detectors and
comparisons, all of a suite's tiers out when one changes (they are compared with its baseline).
Its input comes from every partition of the windows hop, in an order no replay reproduces; its
state is a function of the set of runs (core.suite.state), so it still equals `replay`.

One record per experiment of a suite tier (its share), on the suite's partition: a suite of any
size fits the broker's message limit, and a record that cannot be loaded (its key or its value)
is quarantined alone. Beside them, a suite tier's mark: what made its last published report
(docs/architecture.md, 'Topology')."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from stream_app.core.compact_json import dumps
from stream_app.core.ingest import processing_error
from stream_app.core.keyed_batch import FoldedBatch, key_slices
from stream_app.core.keys import split_suite_key, suite_key
from stream_app.core.suite.message import SuiteItem, SuiteMessage
from stream_app.core.suite.report import report_fingerprint, suite_tiers
from stream_app.core.suite.share import ExperimentShare
from stream_app.core.suite.state import SuiteState, fold_suite_items
from stream_app.core.suite.statistics import SuiteStatus
from stream_app.service.latency_path import Turn, next_turn, plain_turns
from stream_app.service.outputs import Record
from stream_app.service.partitioning import partition_for
from stream_app.service.stages.table_stage import HopStage, Pauses


def record_key(key: str, experiment: str) -> bytes:
    """The table key of an experiment's share of a suite tier (`key`: the suite tier's)."""
    suite, tier = split_suite_key(key)
    return json.dumps([suite, tier, experiment], ensure_ascii=False).encode()


class TableKey(NamedTuple):
    """What a key of the suite table stands for."""

    tier: str
    """The suite tier's key (for a key that is neither a share's nor a mark's: its text, the
    suite tier it is quarantined under)."""
    experiment: str | None
    """A share's experiment; None for a mark, or for a key that is neither."""
    mark: bool
    """Whether it is the suite tier's mark."""


def parse_table_key(raw: bytes) -> TableKey:
    """A table key, read once: a share's (`record_key`), a mark's (`mark_key`), or neither (its
    record is quarantined)."""
    text = raw.decode()
    try:
        parts = json.loads(text)
    except ValueError:
        parts = None
    if isinstance(parts, list) and len(parts) in (2, 3) and all(isinstance(p, str) for p in parts):
        experiment = parts[2] if len(parts) == 3 else None
        return TableKey(suite_key(parts[0], parts[1]), experiment, experiment is None)
    return TableKey(text, None, False)


def mark_key(key: str) -> bytes:
    """The table key of a suite tier's mark (`key`: the suite tier's)."""
    return json.dumps(list(split_suite_key(key)), ensure_ascii=False).encode()


class SuitesStage(HopStage[SuiteState]):
    """Folds each batch of suite messages into the suite tiers, once per suite tier."""

    name = "suite"
    table_name = "suite-states"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index: dict[str, set[str | bytes]] | None = None
        """Every suite tier's records (None: to be read from the table): a share's as its
        experiment (the string its state's shares are keyed by, not a key of its own: a suite
        keeps one for every experiment of each tier), a record that is no share's as its table
        key (to be quarantined)."""
        self.marked: set[str] = set()
        """The suite tiers with a mark, read with the index and kept with it."""
        self.purged: set[str] = set()
        """Suite tiers whose records were quarantined or replaced since they were last published:
        published again (or withdrawn) whatever the batch did to them."""
        self.made_by = report_fingerprint(self.settings).encode()
        """What makes this worker's reports: each published suite tier's mark."""
        self.turns: Callable[[float, Callable[[], bool]], Turn] = plain_turns
        """A batch's pauses between two suite tiers' folds or reports, for the other hops,
        waiting at most the given seconds in all: the worker's are `LatencyPath.turns`."""

    @classmethod
    def partition_key_of(cls, key: str) -> str:
        """A record, and a mark, is partitioned by its suite."""
        return split_suite_key(parse_table_key(key.encode()).tier)[0]

    def _index(self) -> dict[str, set[str | bytes]]:
        """The share records (not the marks) per suite tier (`index`)."""
        if self.index is None:
            self.index, self.marked = {}, set()
            for key in self.table.all_keys():
                parsed = parse_table_key(key)
                if parsed.mark:
                    self.marked.add(parsed.tier)
                else:  # a share's key as `record_key` writes it, else quarantined
                    held: str | bytes = key
                    experiment = parsed.experiment
                    if experiment is not None and record_key(parsed.tier, experiment) == key:
                        held = experiment
                    self.index.setdefault(parsed.tier, set()).add(held)
        return self.index

    def _stale(self, keys: set[str]) -> bool:
        """Whether a suite tier of `keys` was last published otherwise than this worker makes
        it (other settings, another format, or before marks were kept)."""
        return any(self.table.get(mark_key(key)) != self.made_by for key in keys)

    async def _mark(self, key: str, published: bool) -> None:
        """A suite tier's mark after its report was published (or withdrawn), written after
        the report's acknowledgement like every state (`confirm`)."""
        raw = mark_key(key)
        stored = self.table.get(raw)
        if not published:
            self.marked.discard(key)
            if stored is not None:
                await self.table.delete(raw)
        else:
            self.marked.add(key)
            if stored != self.made_by:
                await self.table.put(raw, self.made_by)

    async def _withdraw(self, key: str) -> None:
        """A suite tier with no experiment left: a tombstone for its report, its mark gone."""
        await self.outputs.retire_suite_tier(*split_suite_key(key))
        await self._mark(key, published=False)

    def drop_cache(self) -> None:
        """Forget the suite tiers made, and the index: the table is the truth."""
        super().drop_cache()
        self.index = None

    def cached(self, key: str) -> SuiteState | None:
        """The suite tier from the cache (a batch makes its suite tiers first: `_prepare`)."""
        return self.cache.use(key.encode())

    async def _prepare(self, keys: set[str], pause: Pauses | None = None) -> dict[str, SuiteState]:
        """Each suite tier of `keys` that has records, from the cache or made from them (with
        `pause` between records: a recovery's)."""
        out: dict[str, SuiteState] = {}
        for key in sorted(keys):
            state = self.cache.use(key.encode()) or await self._made(key, pause)
            if state is not None:
                out[key] = state
        return out

    async def _made(self, key: str, pause: Pauses | None = None) -> SuiteState | None:
        """A suite tier made from its records: one that cannot be loaded is quarantined."""
        shares: dict[str, ExperimentShare] = {}
        held = self._index().get(key, set())
        records = {(k if isinstance(k, bytes) else record_key(key, k)): k for k in held}
        for raw_key in sorted(records):
            if pause is not None:
                await pause()
            raw = self.table.get(raw_key)
            if raw is None:
                continue
            experiment = records[raw_key]
            try:
                if isinstance(experiment, bytes):
                    raise ValueError("not the key of an experiment's share of a suite tier")
                shares[experiment] = ExperimentShare.from_state(json.loads(raw))
                continue
            except Exception as exc:
                await self.quarantine(raw_key, exc)
            held.discard(experiment)
            self.purged.add(key)
        return SuiteState(shares) if shares else None

    async def _put(self, key: str, experiment: str, share: ExperimentShare | None) -> None:
        raw_key = record_key(key, experiment)
        held = self._index().setdefault(key, set())
        if share is None:
            if experiment in held:
                await self.table.delete(raw_key)
                held.discard(experiment)
        else:
            await self.table.put(raw_key, dumps(share.to_state()))
            held.add(experiment)

    async def handle_batch(self, batch: Sequence[Record]) -> int:
        """Fold, dead-letter what failed, then write each changed share and publish each changed
        suite tier once (a suite tier with no experiment left is withdrawn)."""
        items: list[tuple[str, SuiteItem]] = []
        sources: list[Record] = []
        for record in batch:
            try:
                message = SuiteMessage.from_json(record.value)
            except Exception as exc:
                await self.outputs.reject(record, processing_error(self.name, exc))
                continue
            key = suite_key(message.suite, message.tier)
            for item in message.items:
                items.append((key, item))
                sources.append(record)
        # waits for the latency path: a batch's interval at most, none while a restoration waits
        turn = self.turns(self.settings.suite_interval_s, lambda: self.queued > 0)
        made = await self._prepare({key for key, _ in items})
        folded: FoldedBatch[str, SuiteState, str | None, SuiteStatus] = FoldedBatch()
        for indices in key_slices(items):  # a suite tier at a time, the other hops in between
            part = [items[i] for i in indices]
            folded.take(fold_suite_items(part, made.get, self.settings.drop_design), indices)
            await turn()
        await self.settle(folded, sources.__getitem__)
        for key, state in folded.states.items():
            changed = sorted({e for _, e in folded.steps[key] if e is not None})
            for experiment in changed:
                await self._put(key, experiment, state.shares.get(experiment))
        touched = {*folded.states, *self.purged}
        await self._publish_suites(touched, {**made, **folded.states}, turn=turn)
        return len(batch)

    async def _publish_suites(
        self,
        touched: set[str],
        states: dict[str, SuiteState],
        pause: Pauses | None = None,
        *,
        publish: bool = True,
        turn: Turn = next_turn,
    ) -> None:
        """Publish every tier of each suite a key of `touched` belongs to (made from `states`,
        else the cache or the records), and withdraw each touched or quarantined suite tier with
        no experiment left; `pause` between reports (a restoration's), else `turn` (a batch's).
        With `publish` False, only the gauges are set (`restore_gauges`)."""
        by_suite: dict[str, set[str]] = {}
        for key in touched:
            by_suite.setdefault(split_suite_key(key)[0], set()).add(key)
        for key in self._index():  # the suites' other tiers, with records
            suite = split_suite_key(key)[0]
            if suite in by_suite:
                by_suite[suite].add(key)
        for suite, keys in sorted(by_suite.items()):
            missing = {k for k in keys if k not in states}
            tiers = {**states, **await self._prepare(missing, pause)}
            alive: dict[str, SuiteState] = {}
            # a suite with a record quarantined (here, or by the batch) is published whatever
            # the caller asked: its reports no longer match its records
            publishing = publish or bool(keys & self.purged)
            for key in sorted(keys):
                state = tiers.get(key)
                # a tier quarantined while loaded here (to compare with) is withdrawn too
                changed = (publish and key in touched) or key in self.purged
                self.purged.discard(key)
                if state is None or not state.shares:
                    self.cache.pop(key.encode(), None)
                    if changed:
                        await self._withdraw(key)
                    continue
                self.cache[key.encode()] = state
                alive[split_suite_key(key)[1]] = state
            settings = self.settings
            for report in suite_tiers(
                suite,
                alive,
                settings.drop_design,
                settings.baseline_tier,
                settings.interval_confidence,
            ):
                if publishing:
                    await self.outputs.suite_tier(report)
                    await self._mark(suite_key(suite, report.tier), published=True)
                else:
                    self.exporter.set_suite(report)
                # the other hops run between two reports
                await (turn() if pause is None else pause())

    async def units_of(self, partitions: set[int], pause: Pauses) -> list[Any]:
        """The suites of `partitions`, each as the keys of its tiers with records or a mark: a
        suite tier is restored from all its records, and a suite's tiers together."""
        n = self.settings.partitions
        async with self.locked():  # a suite tier's records are all on its suite's partition
            index = self._index()
            keys = sorted(
                key
                for key in {*index, *self.marked}
                if partition_for(split_suite_key(key)[0], n) in partitions
            )
        by_suite: dict[str, set[str]] = {}
        for key in keys:
            by_suite.setdefault(split_suite_key(key)[0], set()).add(key)
        return list(by_suite.values())

    async def restore_unit(self, unit: Any, pause: Pauses) -> None:
        """Restore one suite's tiers' gauges, made from their records; publish them again when
        one was last published otherwise (its mark). A mark left without records (a crash
        between the deletions of a withdrawn tier's records and of its mark) is withdrawn."""
        index = self._index()
        for key in sorted(k for k in unit if k not in index):
            await self._withdraw(key)
        kept = {k for k in unit if k in index}
        if kept:
            made = await self._prepare(kept, pause)
            await self._publish_suites(kept, made, pause, publish=self._stale(kept))

    def forget(self, lost: set[int]) -> None:
        """The lost partitions' suites lose their gauges."""
        n = self.settings.partitions
        for suite, tier in list(self.exporter.suites.suites):
            if partition_for(suite, n) in lost:
                self.exporter.remove_suite(suite, tier)

    async def retract(self, key: str) -> None:
        """A quarantined record: nothing to withdraw yet; its suite tier is published again
        without it by the batch or the recovery that found it."""

    def on_revoked(self, lost: set[int]) -> None:
        """Forget the index too: the records of the lost partitions are another worker's."""
        super().on_revoked(lost)
        self.index = None
