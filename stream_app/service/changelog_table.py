"""A stage's table: writes held until the batch's outputs are acknowledged, then sent to the
changelog, then, once the broker acknowledged those too, written to the local store with the
changelog offsets they got. So no state is ever ahead of an output it records (a recovery has
nothing to re-publish), and the local store is never ahead of its changelog."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from stream_app.service.outputs import Send
from stream_app.service.table_store import Change, PartitionedStore


class LocalStore(Protocol):
    """Where a table's acknowledged values live: Faust's store, on disk
    (`table_store.PartitionedStore`) or in memory (`MemoryStore`)."""

    def read(self, key: bytes) -> bytes | None:
        """The stored value, or None."""

    def stored_keys(self) -> Iterable[bytes]:
        """Every stored key, without reading the values (of the active partitions)."""

    def write(self, partition: int, changes: Sequence[Change], offset: int | None) -> None:
        """Apply `changes` (acknowledged by the changelog up to `offset`) at once."""


class MemoryStore:
    """A mapping as the local store (Faust's memory store, or a dict): no checkpoint, since
    nothing of it outlives the process."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def read(self, key: bytes) -> bytes | None:
        """The stored value, or None."""
        value: bytes | None = self.data.get(key)
        return value

    def stored_keys(self) -> Iterable[bytes]:
        """Every stored key."""
        return list(self.data.keys())

    def write(self, partition: int, changes: Sequence[Change], offset: int | None) -> None:
        """Apply `changes`."""
        for key, value in changes:
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value


def local_store(data: Any) -> LocalStore:
    """The local store over a Faust table's `data`."""
    return data if isinstance(data, PartitionedStore) else MemoryStore(data)


class ChangelogTable:
    """A stage's table: reads see its own writes at once; the writes reach the changelog, then
    the local store, once the stage's `Outputs.confirm` has every output of the batch
    acknowledged and calls `write`."""

    def __init__(
        self,
        store: LocalStore,
        send: Send,
        changelog: str,
        partition_of: Callable[[bytes], int],
    ) -> None:
        self.store = store
        self.send = send
        self.changelog = changelog
        self.partition_of = partition_of
        """The partition of a key: the one its stage reads it from (co-partitioned)."""
        self.pending: dict[bytes, bytes | None] = {}
        """Writes of the batch under way, not yet sent (None: a deletion)."""

    def get(self, key: bytes) -> bytes | None:
        """The value, the batch's own write first."""
        if key in self.pending:
            return self.pending[key]
        return self.store.read(key)

    def all_keys(self) -> Iterator[bytes]:
        """Every key, the batch's own writes and deletions counted, without reading a stored
        value (a restoration lists its keys, then reads each one afresh)."""
        pending = dict(self.pending)
        for key in self.store.stored_keys():
            if key not in pending:
                yield key
        yield from (key for key, written in pending.items() if written is not None)

    async def put(self, key: bytes, value: bytes) -> None:
        """Hold a value until the batch's outputs are acknowledged."""
        self.pending[key] = value

    async def delete(self, key: bytes) -> None:
        """Hold a deletion (a tombstone on the changelog) likewise."""
        self.pending[key] = None

    def rollback(self) -> None:
        """Forget the writes held: their batch failed, or its partitions were revoked."""
        self.pending.clear()

    async def write(self) -> None:
        """Send the held writes to the changelog, and once the broker acknowledged them, write
        each partition's to the local store with the offset of its last record, at once. A
        crash before the local write loses nothing: recovery reads the records back."""
        if not self.pending:
            return
        changes = list(self.pending.items())
        acks = []
        for key, value in changes:
            partition = self.partition_of(key)
            acks.append((partition, await self.send(self.changelog, key, value, partition)))
        by_partition: dict[int, list[Change]] = {}
        offsets: dict[int, int] = {}
        for (partition, ack), change in zip(acks, changes, strict=True):
            metadata = await ack
            by_partition.setdefault(partition, []).append(change)
            offset = getattr(metadata, "offset", None)
            if isinstance(offset, int):
                offsets[partition] = max(offsets.get(partition, -1), offset)
        for partition, partition_changes in by_partition.items():
            self.store.write(partition, partition_changes, offsets.get(partition))
        for key, value in changes:
            if self.pending.get(key, ...) is value:
                del self.pending[key]
