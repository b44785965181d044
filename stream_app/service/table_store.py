"""Where a table's states live on the worker's disk: Faust's RocksDB store, one database per
changelog partition, extended through its store class. A key is filed under its stage's
partition, never the current event's; values and checkpoint change in one atomic write; a
database the broker does not vouch for (`check_stores`) is discarded and rebuilt from its
changelog. docs/operations.md, 'The data directory'."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import rocksdict
from aiokafka import TopicPartition
from faust.stores import rocksdb
from faust.types import TP
from typing_extensions import override

from stream_app.service.batches import stop_fatally
from stream_app.service.kafka_client import partition_bounds, read_partitions
from stream_app.service.settings import Settings

log = logging.getLogger(__name__)

STORE_FORMAT: Final = 1
"""The layout of the values and checkpoints a partition's database holds: a database of another
is discarded and rebuilt from the changelog."""

WRITE_BUFFER_BYTES: Final = 4 * 1024 * 1024
"""Each database's memtable: Faust's 64 MiB times three would let 3 tables by 8 partitions hold
gigabytes of unflushed writes; the changelog, not the memtable, is what makes a write durable.
Tried and dropped (docs/benchmark-history.md, 'Under 3 KiB a tier'): one budget for all
databases (a write buffer manager), which flushed six times as often, and 2 MiB memtables."""

BLOCK_CACHE_BYTES: Final = 32 * 1024 * 1024
"""One block cache shared by every database of the process (Faust makes 2 GiB for each): the
stages keep their hot states decoded in their own caches."""

LOAD_BUDGET_S: Final = 30.0
"""The longest the bulk load of empty databases (`load_changelogs`) may hold the rebalance
callback: well within Faust's rebalance timeout (60 s), which the rest of the group waits for."""

LOCK_ATTEMPTS: Final = 30
"""How many times, a second apart, a locked database is tried before the worker stops (Faust's
own opening of a database tries as often)."""

Change = tuple[bytes, bytes | None]
"""A key and its new value (None: deleted)."""


class BrokerView(NamedTuple):
    """What the broker says of a changelog partition, to judge a local database by."""

    cluster_id: str
    earliest: int
    """The offset of the first record still in the partition (its log start)."""
    end: int
    """The offset the next record will get (the high watermark)."""


def distrust(
    made_for: dict[str, Any] | None,
    expected: dict[str, Any],
    persisted: int | None,
    broker: BrokerView,
    *,
    unwritten_s: float = 0.0,
    max_unwritten_s: float = float("inf"),
) -> str | None:
    """Why a partition's local database cannot be trusted, or None when it can: it must have
    been made for this format, cluster and changelog; its checkpoint (the last offset it
    holds) must lie within what the changelog holds, so that reading on from it loses nothing;
    and it must have been written within `max_unwritten_s`, since a compacted changelog drops
    a tombstone after `delete.retention.ms` (a day by default), and a database older than that
    would keep keys deleted since."""
    if made_for is None:
        return "it has no format file"
    if made_for != expected:
        return f"it was made for {made_for}, not {expected}"
    if persisted is None:
        return None
    if unwritten_s > max_unwritten_s:
        return (
            f"it was last written {unwritten_s / 3600:.1f} h ago, longer than "
            f"store_max_unwritten_s ({max_unwritten_s / 3600:.1f} h): deletions since may be gone "
            "from the compacted changelog"
        )
    if persisted >= broker.end:
        return f"its checkpoint {persisted} is ahead of the changelog's end {broker.end}"
    if persisted < broker.earliest - 1:
        return f"its checkpoint {persisted} is before the changelog's start {broker.earliest}"
    return None


def locked(exc: Exception) -> bool:
    """Whether RocksDB refused to open a database because its LOCK file is held (by this
    process's handle of it or another process's), and not for any other reason: a corrupt
    block's "block checksum mismatch" says "lock" too."""
    text = str(exc)
    return "While lock file" in text or "lock hold by current process" in text


class StoreFailed(Exception):
    """A read or write of a local database failed: no event's fault. The database is condemned
    (its format file removed), so the restart that follows rebuilds it from the changelog."""


class StoreOptions(rocksdb.RocksDBOptions):
    """Faust's RocksDB options with small memtables and one block cache for all databases."""

    shared_cache: rocksdict.Cache | None = None

    def __init__(self) -> None:
        super().__init__(
            write_buffer_size=WRITE_BUFFER_BYTES,
            max_write_buffer_number=2,
            target_file_size_base=WRITE_BUFFER_BYTES * 4,
            bloom_filter_size=10,
            use_rocksdict=True,
        )

    @override
    def as_options(self) -> rocksdict.Options:
        """Options for one database, sharing the process's block cache."""
        if StoreOptions.shared_cache is None:
            StoreOptions.shared_cache = rocksdict.Cache(BLOCK_CACHE_BYTES)
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        if self.max_open_files is not None:
            options.set_max_open_files(self.max_open_files)
        options.set_write_buffer_size(self.write_buffer_size)
        options.set_max_write_buffer_number(self.max_write_buffer_number)
        options.set_target_file_size_base(self.target_file_size_base)
        table = rocksdict.BlockBasedOptions()
        table.set_bloom_filter(self.bloom_filter_size, block_based=True)
        table.set_block_cache(StoreOptions.shared_cache)
        options.set_block_based_table_factory(table)
        return options


class PartitionedStore(rocksdb.Store):
    """Faust's RocksDB store, each key in its own partition's database, each write atomic with
    its partition's checkpoint. Registered as Faust's `evalstream-rocksdb://` store (an entry
    point of the `faust.stores` group)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rocksdb_options = StoreOptions()
        self.key_partition: Callable[[bytes], int] | None = None
        """The partition of a key (`ChangelogTable` sets the stage's)."""
        self.made_for: dict[str, Any] = {"format": STORE_FORMAT}
        """What a database must have been made for (`expect` adds the cluster and changelog)."""
        self.max_unwritten_s = float("inf")
        """How long a database may have gone unwritten and still be trusted (`expect`)."""

    @property
    def changelog(self) -> str:
        """The table's changelog topic."""
        name: str = self.table.changelog_topic.get_topic_name()
        return name

    def expect(
        self, cluster_id: str, changelog: str, max_unwritten_s: float = float("inf")
    ) -> None:
        """The cluster and changelog this worker's databases are made for, and how long one
        may have gone unwritten."""
        self.made_for = {"format": STORE_FORMAT, "cluster_id": cluster_id, "changelog": changelog}
        self.max_unwritten_s = max_unwritten_s

    def partition_of(self, key: bytes) -> int:
        """The partition a key is filed under."""
        if self.key_partition is None:
            raise RuntimeError(f"{self.table_name}: no key partitioner set")
        return self.key_partition(key)

    def checkpoint(self, tp: TP) -> int | None:
        """The changelog offset of the last record a partition's database holds."""
        return self._checkpoint(tp)[0]

    def _checkpoint(self, tp: TP) -> tuple[int | None, float | None]:
        """The checkpoint's offset and the time of its write (seconds since the epoch)."""
        raw = self._db_for_partition(tp.partition).get(self.offset_key)
        if raw is None:
            return None, None
        offset, *written = raw.split()
        return int(offset), float(written[0]) if written else None

    @override
    def persisted_offset(self, tp: TP) -> int | None:
        """Where Faust's recovery reads on from: one record before the checkpoint (re-read,
        it changes nothing), so that a recovery always has a record to read. Faust's recovery
        takes another path when none is left (it resumes the streams without fetching), in
        which a stream partition was seen to stall after a rebalance (test_chaos's connection
        cut, one run in two); with a record to read, it takes the path the memory store
        always takes."""
        offset = self.checkpoint(tp)
        return None if offset is None or offset < 1 else offset - 1

    def read(self, key: bytes) -> bytes | None:
        """The stored value of a key, or None."""
        return self._get(key)

    def stored_keys(self) -> Iterator[bytes]:
        """Every key of the partitions this worker is active for, no value read."""
        try:
            yield from self._iterkeys()
        except Exception as exc:
            raise StoreFailed(f"{self.table_name}: a local database failed ({exc})") from exc

    @override
    def _get(self, key: bytes) -> bytes | None:
        partition = self.partition_of(key)
        try:
            value: bytes | None = self._db_for_partition(partition).get(key)
        except Exception as exc:
            raise self.condemn(partition, exc) from exc
        return value

    @override
    def _set(self, key: bytes, value: bytes | None) -> None:
        self.write(self.partition_of(key), [(key, value)], None)

    @override
    def _del(self, key: bytes) -> None:
        self.write(self.partition_of(key), [(key, None)], None)

    @override
    def _contains(self, key: bytes) -> bool:
        return self._get(key) is not None

    def write(self, partition: int, changes: Sequence[Change], offset: int | None) -> None:
        """Apply `changes` to a partition's database and, in the same atomic write, set its
        checkpoint to `offset` (the changelog offset of the last of them), if given."""
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in changes:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        if offset is not None:
            batch.put(self.offset_key, f"{offset} {time.time():.0f}".encode())
        try:
            self._db_for_partition(partition).write(batch)
        except Exception as exc:
            raise self.condemn(partition, exc) from exc

    @override
    def apply_changelog_batch(
        self,
        batch: Iterable[Any],
        to_key: Callable[[Any], Any],
        to_value: Callable[[Any], Any],
    ) -> None:
        """Faust's recovery (or a standby) applies changelog records: each partition's values
        and checkpoint in one write, so a crash mid-way leaves a database that is merely
        behind, never one whose checkpoint claims records it lacks."""
        changes: dict[int, list[Change]] = {}
        offsets: dict[int, int] = {}
        for event in batch:
            message = event.message
            changes.setdefault(message.partition, []).append((message.key, message.value))
            offsets[message.partition] = max(offsets.get(message.partition, -1), message.offset)
        try:
            for partition, partition_changes in changes.items():
                self.write(partition, partition_changes, offsets[partition])
        except StoreFailed as exc:  # Faust's recovery would log it and go on reading
            stop_fatally("recovery", exc)

    def format_file(self, partition: int) -> Path:
        """The file that says what a partition's database was made for."""
        path = self.partition_path(partition)
        return path.with_name(f"{path.name}.format.json")

    def check(self, tp: TP, broker: BrokerView) -> str | None:
        """Keep a newly assigned partition's database if it can be trusted; else discard it and
        start an empty one (recovery then reads the whole changelog). Returns why it was
        discarded, or None."""
        partition = tp.partition
        path, format_file = self.partition_path(partition), self.format_file(partition)
        reason: str | None = None
        if path.exists():
            try:
                made_for = json.loads(format_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                made_for = None
            try:
                persisted, written = self._checkpoint(tp)
            except Exception as exc:  # it does not open, or its checkpoint does not read
                if locked(exc):  # another process has it open: not ours to drop
                    raise
                reason = f"it does not open ({exc})"
            else:
                unwritten = 0.0 if written is None else max(time.time() - written, 0.0)
                reason = distrust(
                    made_for,
                    self.made_for,
                    persisted,
                    broker,
                    unwritten_s=unwritten,
                    max_unwritten_s=self.max_unwritten_s,
                )
            if reason is not None:
                self.discard(partition)
        if not format_file.exists():
            self._db_for_partition(partition)  # made empty, then said what for
            temporary = format_file.with_name(format_file.name + ".tmp")
            temporary.write_text(json.dumps(self.made_for), encoding="utf-8")
            os.replace(temporary, format_file)
        return reason

    def discard(self, partition: int) -> None:
        """Close and delete a partition's database and its format file."""
        db = self._dbs.pop(partition, None)
        if db is not None:
            with contextlib.suppress(Exception):
                db.close()
        self.format_file(partition).unlink(missing_ok=True)
        shutil.rmtree(self.partition_path(partition), ignore_errors=True)

    def condemn(self, partition: int, exc: Exception) -> StoreFailed:
        """A read or write of a partition's database failed: remove its format file, so the
        next start discards it, and say so."""
        self.format_file(partition).unlink(missing_ok=True)
        return StoreFailed(
            f"{self.table_name}: the local database of partition {partition} failed ({exc}); "
            "it is rebuilt from the changelog at the next start"
        )

    def estimated_keys(self) -> int:
        """RocksDB's estimate of the keys held in the partitions this worker is active for
        (counting them would read every one)."""
        total = 0
        for db in list(self._dbs_for_actives()):
            with contextlib.suppress(Exception):
                total += int(db.property_int_value("rocksdb.estimate-num-keys") or 0)
        return total


async def check_stores(
    settings: Settings,
    stores: Iterable[PartitionedStore],
    assigned: Iterable[TP],
    actives: Collection[TP] = frozenset(),
) -> None:
    """Judge the local database of every newly assigned changelog partition of `stores` by what
    the broker says of it (`PartitionedStore.check`), before Faust's recovery reads their
    checkpoints; log each one discarded. Then load the empty ones this worker is active for
    (not its standby copies, which Faust reads after the streams resume) in bulk."""
    wanted: dict[str, PartitionedStore] = {store.changelog: store for store in stores}
    tps = [tp for tp in assigned if tp.topic in wanted]
    if not tps:
        return
    cluster_id, bounds = await partition_bounds(
        settings, [TopicPartition(tp.topic, tp.partition) for tp in tps]
    )
    empty: dict[TopicPartition, tuple[PartitionedStore, int, int]] = {}
    for tp in sorted(tps):
        store = wanted[tp.topic]
        store.expect(cluster_id, tp.topic, settings.store_max_unwritten_s)
        earliest, end = bounds[TopicPartition(tp.topic, tp.partition)]
        for attempt in range(LOCK_ATTEMPTS):
            try:
                reason = store.check(tp, BrokerView(cluster_id, earliest, end))
                break
            except Exception as exc:
                # Locked: by this process's handle of a partition revoked a moment ago, not
                # yet closed, or by another process (which Faust's own opening waits for too).
                if not locked(exc) or attempt == LOCK_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(1.0)
        if reason is not None:
            log.warning(
                "%s[%d]: local database discarded, rebuilt from the changelog: %s",
                tp.topic,
                tp.partition,
                reason,
            )
        if tp in actives and store.checkpoint(tp) is None:
            empty[TopicPartition(tp.topic, tp.partition)] = (store, earliest, end)
    await load_changelogs(settings, empty)


async def load_changelogs(
    settings: Settings, empty: dict[TopicPartition, tuple[PartitionedStore, int, int]]
) -> None:
    """Fill each empty database (store, the changelog's start and end) from its changelog in
    bulk, as Kafka Streams restores a store: large fetches, one write per fetch with its
    checkpoint. Faust's recovery then reads only what came after; it reads the same records one
    event at a time, at many times the cost (docs/benchmark-history.md). This runs in the
    rebalance callback, so it stops after `LOAD_BUDGET_S` or at a broker error and leaves the
    rest to Faust's recovery: every write carries its checkpoint, so a database loaded in part
    is merely behind. A database that fails to write stops the worker."""
    spans = {tp: (start, end) for tp, (_, start, end) in empty.items()}
    if not any(start < end for start, end in spans.values()):
        return
    loop = asyncio.get_running_loop()
    started, count, deadline = loop.time(), 0, loop.time() + LOAD_BUDGET_S
    try:
        async for tp, records in read_partitions(settings, spans, deadline):
            store = empty[tp][0]
            changes = [(r.key, r.value) for r in records if r.key is not None]
            try:
                store.write(tp.partition, changes, records[-1].offset)
            except StoreFailed as exc:
                stop_fatally("recovery", exc)
            count += len(records)
    except Exception as exc:  # the broker: Faust's recovery reads what is left, and waits
        log.warning("loading changelogs in bulk stopped (%s): Faust's recovery reads on", exc)
    log.info(
        "%d changelog records loaded into %d empty local databases in %.1f s%s",
        count,
        len(spans),
        loop.time() - started,
        "" if loop.time() < deadline else " (out of time: Faust's recovery reads the rest)",
    )
