"""What the stateful stages share: a table with a cache in front of it, outputs acknowledged
before the states that record them are written, the quarantine of stored states that cannot
load, the restoration of newly owned keys' gauges after a recovery, and revoke clean-up; and,
for the stages an agent runs (`HopStage`), their batches. A subclass says how it folds and what
gauges one stored key has."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, ClassVar, Final, Generic, Protocol, TypeVar

from stream_app.core.ingest import processing_error, state_error
from stream_app.core.keyed_batch import FoldedBatch
from stream_app.service.exporter import Exporter
from stream_app.service.outputs import Outputs, Record
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import Settings

S = TypeVar("S")

RECOVERY_SLICE_S: Final = 0.002
"""The longest a gauge restoration works before it gives the event loop back. Short: a batch
takes dozens of turns of the loop from fetch to acknowledgement, each behind one slice; at
20 ms the first batch after a restart with 100,000 tiers came 2 to 5 s after `/readyz`, at
2 ms 0.6 s (docs/benchmark-history.md)."""
RECOVERY_REST_S: Final = 0.001
"""How long a gauge restoration then rests, the loop idle if nothing else is ready: its thread
otherwise never lets go of the interpreter lock but for an instant, and the consumer thread,
which lets go at every system call, waits for it each time (docs/benchmark-history.md,
'Gauges after the rebalance')."""


class Revoked(Exception):
    """Partitions were revoked while a recovery or a gauge restoration was under way: it stops
    there, and the recovery after the rebalance restores what this worker owns then."""


class Pauses:
    """Gives the event loop back whenever `slice_s` has passed since it last did: a walk over
    every stored key (a gauge restoration: seconds with 100,000 tiers) must not hold batches,
    `/healthz` and `/metrics` until it ends. Raises `Revoked` once `owned` says the partitions
    are gone, so a walk never publishes, deletes or quarantines what another worker now owns."""

    def __init__(self, slice_s: float, owned: Callable[[], bool], rest_s: float = 0.0) -> None:
        self.slice_s = slice_s
        self.owned = owned
        self.rest_s = rest_s
        self.since = time.monotonic()

    async def __call__(self) -> None:
        """A turn of the loop, of `rest_s` at least, if this slice is used up (no await
        otherwise); `Revoked` if the partitions were revoked since the walk began."""
        if time.monotonic() - self.since >= self.slice_s:
            await asyncio.sleep(self.rest_s)
            self.since = time.monotonic()
        if not self.owned():
            raise Revoked


class StateTable(Protocol):
    """Where a stage keeps its states: read at once, written through a send that the batch
    confirms (a Faust table and its changelog in the worker, a dict in the unit tests)."""

    def get(self, key: bytes) -> bytes | None:
        """The stored value, or None."""

    def all_keys(self) -> Iterable[bytes]:
        """Every stored key, no value read."""

    async def put(self, key: bytes, value: bytes) -> None:
        """Store a value (and send it to the changelog)."""

    async def delete(self, key: bytes) -> None:
        """Remove a key (and send its tombstone)."""

    def rollback(self) -> None:
        """Forget the writes of a batch that failed (not yet written)."""

    async def write(self) -> None:
        """Write what was put and deleted since the last call: called by `Outputs.confirm`
        once every output sent before it is acknowledged."""


class StateCache(dict[bytes, S]):
    """The decoded states of the most recently used keys, at most `max_keys`: decoded states
    are many small objects, and a cache of every key would cost memory and garbage-collector
    pauses that grow with the number of experiments."""

    def __init__(self, max_keys: int) -> None:
        super().__init__()
        self.max_keys = max_keys

    def __setitem__(self, key: bytes, value: S) -> None:
        self.pop(key, None)  # to the end: the most recently used
        super().__setitem__(key, value)
        while len(self) > self.max_keys:
            del self[next(iter(self))]

    def use(self, key: bytes) -> S | None:
        """The state of `key`, now the most recently used; None when not cached."""
        value = self.pop(key, None)
        if value is not None:
            super().__setitem__(key, value)
        return value


class TableStage(Generic[S]):
    """A stage whose state lives in a table (and its changelog), decoded states cached."""

    name: ClassVar[str]
    table_name: ClassVar[str]

    def __init__(
        self,
        table: StateTable,
        changelog: str,
        settings: Settings,
        outputs: Outputs,
        exporter: Exporter,
    ) -> None:
        self.table = table
        self.changelog = changelog
        self.settings = settings
        self.outputs = outputs
        self.exporter = exporter
        outputs.state_writers.append(table.write)
        self.cache: StateCache[S] = StateCache(settings.state_cache_keys)
        """Decoded states of the keys this worker handled last, so a batch does not re-read the
        table; the table stays the truth: dropped on rebalance and whenever a batch fails."""
        self.lock = asyncio.Lock()
        """Held by a batch, by recovery and by other writers of the table (retirement), which
        run between batches on the same event loop."""
        self.queued = 0
        """Writers other than the batches waiting for the lock (`locked`): a batch then takes
        its turns without waiting for the latency path (`latency_path`)."""
        self.generation = 0
        """Counts rebalances (revocations): a writer that awaited across one must not go on
        with keys it may no longer own."""
        self.recovery_slice_s = RECOVERY_SLICE_S
        """How long a gauge restoration works between two turns of the event loop."""
        self.rest_s = RECOVERY_REST_S
        """How long each of those turns lasts at least."""
        self.shown: set[int] = set()
        """Partitions some of whose keys may have gauges on this worker."""
        self.restored: set[int] = set()
        """Partitions every key of which has its gauges (`restore_gauges` done)."""

    @classmethod
    def partition_key_of(cls, key: str) -> str:
        """What a stored key is partitioned by: its experiment, or the suite hop's suite."""
        raise NotImplementedError

    @classmethod
    def key_partition(cls, key: bytes, partitions: int) -> int:
        """The partition of a stored key: its partition key's (see `partitioning`)."""
        return partition_for(cls.partition_key_of(key.decode(errors="replace")), partitions)

    def partition_of(self, key: bytes) -> int:
        """The partition of a stored key in this worker's topics."""
        return self.key_partition(key, self.settings.partitions)

    def load(self, key: str, raw: bytes) -> S:
        """A stored state, checked: raising here quarantines the key."""
        raise NotImplementedError

    def cached(self, key: str) -> S | None:
        """The key's state from the cache, else from the table, else None (no state yet)."""
        key_bytes = key.encode()
        state = self.cache.use(key_bytes)
        if state is not None:
            return state
        raw = self.table.get(key_bytes)
        return None if raw is None else self.load(key, raw)

    async def confirm(self, *, states: bool = True) -> None:
        """The end of a batch (or of another writer's work): its outputs acknowledged, then,
        unless `states` is False, its states written (`Outputs.confirm`)."""
        await self.outputs.confirm(states=states)

    def rollback(self) -> None:
        """A batch failed: drop the cache, which may be ahead of the table, and the writes held."""
        self.drop_cache()
        self.table.rollback()

    async def settle(
        self, folded: FoldedBatch[str, S, Any, Any], source: Callable[[int], Record]
    ) -> None:
        """Dead-letter a fold's failed events (`source` gives the message of the fold's i-th
        event) and quarantine its unreadable states; forget the cached state of every key the
        fold touched but will not save (it may be ahead)."""
        for failure in folded.failures:
            await self.outputs.reject(
                source(failure.index), processing_error(self.name, failure.error)
            )
        for bad in folded.quarantined:
            await self.quarantine(bad.key.encode(), bad.error)
        for key in folded.steps:
            if key not in folded.states:
                self.cache.pop(key.encode(), None)

    async def quarantine(self, key: bytes, error: Exception) -> None:
        """Dead-letter a stored state that cannot be used, count it, withdraw its outputs, and
        reset its key (a tombstone on the changelog), so that it can never wedge the worker
        again. The letter and the withdrawal are acknowledged before the reset: a crash in
        between quarantines the key again, rather than leave an output no state stands for."""
        raw = self.table.get(key)
        await self.outputs.dead_letter(
            raw if isinstance(raw, bytes) else b"",
            state_error(self.table_name, error),
            self.changelog,
            key=key,
        )
        self.exporter.quarantined.labels(table=self.table_name).inc()
        await self.retract(key.decode(errors="replace"))  # else its outputs and gauges stay
        await self.confirm(states=False)  # the batch's states wait for its outputs
        await self.table.delete(key)

    async def retract(self, key: str) -> None:
        """Withdraw what a key published (a quarantined state): tombstones and gauges."""
        raise NotImplementedError

    async def on_recover(
        self, owned: set[int], generation: int | None = None, moved: AbstractSet[int] = frozenset()
    ) -> set[int]:
        """The table is recovered (after every rebalance): every state is as its changelog has
        it, and every output it records was acknowledged before it was written, so nothing is
        re-published. The gauges of partitions no longer owned go, and those of `moved`
        (partitions that left this worker since, and may be back: another worker changed
        their keys meanwhile); returns the owned partitions whose gauges are yet to be
        restored (`restore_gauges`). `generation`: the stage's when `owned` was read (default:
        now); raises `Revoked` once a revocation has come since, even while this waited for
        the lock."""
        start = self.generation if generation is None else generation
        async with self.locked():
            if self.generation != start:
                raise Revoked
            self.drop_cache()
            self.restored -= moved
            lost = (self.shown - owned) | (self.shown & moved)
            if lost:
                self.forget(lost)
            self.restored &= owned
            self.shown = set(owned)
            return owned - self.restored

    async def restore_gauges(self, partitions: set[int], generation: int) -> int:
        """Restore the gauges (and what else this worker keeps in memory of its keys) of every
        stored key of `partitions`, between batches, a unit at a time (`restore_unit`) under
        the lock, each read afresh so that no batch's newer figure is overwritten. Raises
        `Revoked` once a revocation comes. Returns the units restored."""
        pause = Pauses(self.recovery_slice_s, lambda: self.generation == generation, self.rest_s)
        units = await self.units_of(partitions, pause)
        left = self.exporter.restoring.labels(table=self.table_name)
        left.set(len(units))
        try:
            for done, unit in enumerate(units, start=1):
                await pause()
                async with self.locked():
                    if self.generation != generation:
                        raise Revoked
                    await self.restore_unit(unit, pause)
                    await self.confirm()
                left.set(len(units) - done)
        finally:
            left.set(0)
        self.restored |= partitions
        return len(units)

    async def units_of(self, partitions: set[int], pause: Pauses) -> list[Any]:
        """What `restore_gauges` restores one at a time: the stored keys of `partitions`."""
        keys: list[bytes] = []
        for key in self.table.all_keys():
            if self.partition_of(key) in partitions:
                keys.append(key)
            await pause()
        return keys

    async def restore_unit(self, unit: Any, pause: Pauses) -> None:
        """Restore one stored key, as it is now."""
        raw = self.table.get(unit)
        if raw is not None:
            await self.restore(unit, raw)

    async def restore(self, key: bytes, raw: bytes) -> None:
        """Restore one stored key's gauges; a state that cannot be loaded is quarantined."""
        try:
            self.restore_state(key.decode(), raw)
        except Exception as exc:
            await self.quarantine(key, exc)

    def restore_state(self, key: str, raw: bytes) -> None:
        """Restore the gauges of one stored key from its state (raising quarantines it)."""
        raise NotImplementedError

    def forget(self, lost: set[int]) -> None:
        """Drop the gauges of the keys of partitions that went to another worker."""
        raise NotImplementedError

    async def revoke(self, lost: set[int]) -> None:
        """Partitions were revoked: once the writer that holds the table is done (a retirement,
        a restoration's key; Faust has waited for the batches), so that every state it changed
        is on the changelog before another worker reads it, `on_revoked`."""
        async with self.locked():
            self.on_revoked(lost)

    @contextlib.asynccontextmanager
    async def locked(self) -> AsyncIterator[None]:
        """The lock, for a writer other than the batches: counted while it waits (`queued`)."""
        self.queued += 1
        try:
            await self.lock.acquire()
        finally:
            self.queued -= 1
        try:
            yield
        finally:
            self.lock.release()

    def on_revoked(self, lost: set[int]) -> None:
        """A recovery or restoration under way stops, the cache goes. The gauges stay until
        the recovery that follows says which partitions are gone."""
        self.generation += 1
        self.drop_cache()

    def drop_cache(self) -> None:
        """Forget the decoded states: the next batch reads the table."""
        self.cache.clear()


class HopStage(TableStage[S]):
    """A stateful stage an agent runs on its hop's batches: the windows and suite stages (the
    cross-tier stage runs inside the windows hop, `Hop.inner`, and takes no batch of its own)."""

    async def handle(self, batch: Sequence[Record]) -> int:
        """Process one batch: its outputs acknowledged, then its states written
        (`Outputs.confirm`). A failed batch drops the cache, which may be ahead of the table,
        and the writes it held. Returns the number of events it held."""
        async with self.lock:
            try:
                handled = await self.handle_batch(batch)
                await self.confirm()
            except BaseException:
                self.rollback()
                raise
            return handled

    async def handle_batch(self, batch: Sequence[Record]) -> int:
        """The subclass's batch; returns the number of events it held."""
        raise NotImplementedError
