"""A Faust table whose changelog records go out through the stage's own confirmed sends."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stream_app.service.outputs import Outputs


class ChangelogTable:
    """A stage's table: Faust's store for the values, the stage's `Outputs` for the changelog.

    Faust sends a table's changelog records from a background buffer and does not fail the
    batch when the broker refuses one: the offsets are committed, and the state lost. Here the
    value goes into the table's store directly (Faust's `Table.data`) and the record, the same
    raw key and value Faust would write, to the key's partition of the changelog through
    `Outputs.send`, so the batch runner confirms it like every other output. Faust's recovery
    reads these records as its own."""

    def __init__(self, table: Any, outputs: Outputs, partition_of: Callable[[bytes], int]) -> None:
        self.table = table
        self.outputs = outputs
        self.partition_of = partition_of
        """The partition of a key: the one its stage reads it from (co-partitioned)."""
        self.changelog: str = table.changelog_topic.get_topic_name()

    def get(self, key: bytes) -> bytes | None:
        """The stored value, or None."""
        value: bytes | None = self.table.data.get(key)
        return value

    def items(self) -> Iterable[tuple[bytes, bytes | None]]:
        """Every stored key and value."""
        return list(self.table.data.items())

    async def put(self, key: bytes, value: bytes) -> None:
        """Store the value and send it to the changelog."""
        self.table.data[key] = value
        await self.outputs.send(self.changelog, key, value, self.partition_of(key))

    async def delete(self, key: bytes) -> None:
        """Remove the key and send its tombstone."""
        self.table.data.pop(key, None)
        await self.outputs.send(self.changelog, key, None, self.partition_of(key))
