"""Kafka's default partitioner (murmur2 of the key bytes, made positive, modulo the partition
count), so that evalstream and any Java producer agree on where a key lives. The worker sends with
explicit partitions: that lets it know exactly which keys it owns after a rebalance.

Every topic and table is partitioned by *experiment*: a tier's runs, its window, its aggregate
and its experiment's cross-tier state all sit on partition `partition_for(experiment_id)`, which
Faust's co-partitioning assigns to one worker. That worker owns the whole experiment: it can
retire it at once, and it answers the query API for it."""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from aiokafka.partitioner import murmur2

HASHES_KEPT: Final = 4096
"""Keys whose hash is remembered: murmur2 is pure Python, and each run's experiment is hashed at
every hop. The experiments of the runs in flight are usually fewer; the keys kept take a few MiB
at most (an experiment id is at most 800 bytes)."""


def partition_for(key: str | bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives `key`."""
    return _positive_hash(key.encode() if isinstance(key, str) else key) % partitions


@lru_cache(maxsize=HASHES_KEPT)
def _positive_hash(data: bytes) -> int:
    hashed: int = murmur2(data)
    return hashed & 0x7FFFFFFF
