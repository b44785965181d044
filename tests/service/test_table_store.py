"""The worker's RocksDB store (`table_store`) on a real RocksDB in a temporary directory: each key
in its own partition's database whatever event is current, values and checkpoint in one write,
and a database its changelog does not vouch for discarded. The broker's side of it (a restart
that reads only the tail, a kill around the local write, damaged stores) is
tests/integration/test_persistent_store.py's."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import faust
import pytest
import rocksdict
from faust.types import TP

from stream_app.service.changelog_table import ChangelogTable, MemoryStore
from stream_app.service.table_store import (
    STORE_FORMAT,
    BrokerView,
    PartitionedStore,
    StoreFailed,
    distrust,
    locked,
)

CHANGELOG = "t-states-changelog"
MADE = {"format": STORE_FORMAT, "cluster_id": "c1", "changelog": CHANGELOG}


def tp(partition: int) -> TP:
    return TP(CHANGELOG, partition)


def open_store(data_dir: Path) -> PartitionedStore:
    app = faust.App("t", store="evalstream-rocksdb://", datadir=str(data_dir), autodiscover=False)
    table = app.Table("states", partitions=4, key_type=bytes, value_type=bytes)
    store = table.data
    assert isinstance(store, PartitionedStore)
    store.key_partition = lambda key: key[0] % 4
    store.expect("c1", CHANGELOG)
    return store


def close(store: PartitionedStore) -> None:
    for partition in list(store._dbs):
        with contextlib.suppress(rocksdict.DbClosedError):
            store._dbs.pop(partition).close()
    gc.collect()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[PartitionedStore]:
    opened = open_store(tmp_path)
    yield opened
    close(opened)


def event(partition: int, offset: int, key: bytes, value: bytes | None) -> Any:
    return SimpleNamespace(
        message=SimpleNamespace(partition=partition, offset=offset, key=key, value=value)
    )


def test_a_key_lives_in_its_own_partition_and_the_checkpoint_moves_with_it(
    store: PartitionedStore,
) -> None:
    store.write(1, [(b"a", b"1"), (b"e", b"2")], 7)  # 'a' and 'e' are partition 1's
    assert store.read(b"a") == b"1"
    assert store.checkpoint(tp(1)) == 7
    assert store.persisted_offset(tp(1)) == 6  # Faust re-reads the last record
    assert store.checkpoint(tp(0)) is None
    store.write(1, [(b"a", None)], 8)
    assert store.read(b"a") is None
    assert store.read(b"e") == b"2"
    assert store._dbs[0].get(b"e") is None  # never filed under another partition
    store[b"i"] = b"3"  # Faust's own path: no event is current, the key says where
    assert store._dbs[1].get(b"i") == b"3"


def test_recovery_writes_values_and_checkpoints_per_partition(store: PartitionedStore) -> None:
    batch = [event(1, 3, b"a", b"1"), event(2, 9, b"b", b"2"), event(1, 4, b"a", None)]
    store.apply_changelog_batch(batch, lambda k: k, lambda v: v)
    assert store.read(b"a") is None
    assert store.read(b"b") == b"2"
    assert (store.checkpoint(tp(1)), store.checkpoint(tp(2))) == (4, 9)


BROKER = BrokerView("c1", earliest=0, end=10)


@pytest.mark.parametrize(
    ("made_for", "persisted", "broker", "why"),
    [
        (MADE, None, BROKER, None),
        (MADE, 9, BROKER, None),
        (MADE, 0, BrokerView("c1", 1, 10), None),  # the next record is the first left
        (None, 3, BROKER, "no format file"),
        ({**MADE, "format": 0}, 3, BROKER, "made for"),
        ({**MADE, "cluster_id": "c2"}, 3, BROKER, "made for"),
        ({**MADE, "changelog": "other"}, 3, BROKER, "made for"),
        (MADE, 10, BROKER, "ahead"),
        (MADE, 2, BrokerView("c1", 5, 10), "before the changelog's start"),
    ],
)
def test_what_a_checkpoint_is_trusted_against(
    made_for: dict[str, Any] | None, persisted: int | None, broker: BrokerView, why: str | None
) -> None:
    reason = distrust(made_for, MADE, persisted, broker)
    assert (reason is None) if why is None else (reason is not None and why in reason)


def test_a_database_unwritten_for_longer_than_tombstones_are_kept_is_not_trusted() -> None:
    """A compacted changelog drops a deletion's tombstone after `delete.retention.ms`: a
    database older than that would keep the deleted key."""
    assert distrust(MADE, MADE, 3, BROKER, unwritten_s=3600, max_unwritten_s=7200) is None
    reason = distrust(MADE, MADE, 3, BROKER, unwritten_s=9000, max_unwritten_s=7200)
    assert reason is not None
    assert "last written 2.5 h ago" in reason


def test_only_a_held_lock_file_counts_as_locked() -> None:
    assert locked(Exception("IO error: While lock file: /d/x-1.db/LOCK: Resource unavailable"))
    assert locked(Exception("IO error: lock hold by current process, acquire time 17"))
    assert not locked(Exception("Corruption: block checksum mismatch: stored = 1"))


def test_a_trusted_database_is_kept_across_a_restart(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    assert first.check(tp(1), BROKER) is None  # new: made, and said what for
    assert json.loads(first.format_file(1).read_text()) == MADE
    first.write(1, [(b"a", b"1")], 5)
    close(first)
    again = open_store(tmp_path)
    assert again.check(tp(1), BROKER) is None
    assert again.read(b"a") == b"1"
    close(again)


def test_a_database_written_long_ago_is_discarded(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    first.check(tp(1), BROKER)
    first.write(1, [(b"a", b"1")], 5)
    first._dbs[1].put(first.offset_key, f"5 {time.time() - 3 * 86_400:.0f}".encode())
    close(first)
    again = open_store(tmp_path)
    again.expect("c1", CHANGELOG, max_unwritten_s=86_400)
    reason = again.check(tp(1), BROKER)
    assert reason is not None
    assert "last written 72.0 h ago" in reason
    assert again.read(b"a") is None
    close(again)


@pytest.mark.parametrize("damage", ["ahead", "other_cluster", "no_format", "unreadable"])
def test_a_database_its_changelog_does_not_vouch_for_is_discarded(
    tmp_path: Path, damage: str
) -> None:
    first = open_store(tmp_path)
    first.check(tp(1), BROKER)
    first.write(1, [(b"a", b"1")], 5)
    close(first)
    broker = BROKER
    if damage == "ahead":
        broker = BrokerView("c1", 0, 5)  # the changelog ends before the checkpoint
    elif damage == "other_cluster":
        broker = BrokerView("c2", 0, 10)
    elif damage == "no_format":
        first.format_file(1).unlink()
    else:
        for path in first.partition_path(1).glob("MANIFEST*"):
            path.write_bytes(b"\0" * 16)
    again = open_store(tmp_path)
    if damage == "other_cluster":
        again.expect("c2", CHANGELOG)
    assert again.check(tp(1), broker) is not None
    assert again.read(b"a") is None  # empty: recovery reads the changelog from its start
    assert again.checkpoint(tp(1)) is None
    assert json.loads(again.format_file(1).read_text())["format"] == STORE_FORMAT
    close(again)


def test_a_failed_write_condemns_its_database(store: PartitionedStore) -> None:
    store.check(tp(1), BROKER)
    store.write(1, [(b"a", b"1")], 5)
    store._dbs[1].close()
    with pytest.raises(StoreFailed, match="rebuilt from the changelog at the next start"):
        store.write(1, [(b"a", b"2")], 6)
    assert not store.format_file(1).exists()  # the next start discards it
    with pytest.raises(StoreFailed):
        store.read(b"a")


def test_the_keys_are_listed_without_their_values_and_only_the_active_partitions(
    store: PartitionedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restoration lists the keys to restore, then reads each afresh: the listing skips the
    checkpoint's key and the partitions this worker is not active for."""
    store.write(1, [(b"a", b"1"), (b"e", b"2")], 7)
    store.write(2, [(b"b", b"3")], 4)
    monkeypatch.setattr(store.app.assignor, "assigned_actives", lambda: {tp(1)})
    assert sorted(store.stored_keys()) == [b"a", b"e"]
    monkeypatch.setattr(store.app.assignor, "assigned_actives", lambda: {tp(1), tp(2)})
    assert sorted(store.stored_keys()) == [b"a", b"b", b"e"]


def test_a_table_lists_its_batchs_writes_and_deletions_over_the_stored_keys() -> None:
    stored = MemoryStore({b"a": b"1", b"b": b"2"})

    async def send(*_: Any) -> Any:
        raise AssertionError("nothing is sent before a confirm")

    table = ChangelogTable(stored, send, CHANGELOG, lambda key: key[0] % 4)

    async def batch() -> None:
        await table.delete(b"a")
        await table.put(b"c", b"3")
        await table.put(b"b", b"4")

    asyncio.run(batch())
    assert sorted(table.all_keys()) == [b"b", b"c"]
