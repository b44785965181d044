"""Kafka's default partitioner (murmur2 of the key bytes, made positive, modulo the partition
count), so that evalstream and any Java producer agree on where a key lives. The worker sends with
explicit partitions: that lets it know exactly which keys it owns after a rebalance."""

from __future__ import annotations

from aiokafka.partitioner import murmur2


def partition_for(key: str | bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives `key`."""
    data = key.encode() if isinstance(key, str) else key
    hashed: int = murmur2(data)
    return (hashed & 0x7FFFFFFF) % partitions
