"""High watermarks as Fetch responses report them: the end of each partition on a broker whose
ListOffsets can answer below it (Tansu; Apache Kafka's answers are right)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import TopicPartition

from stream_app.service.kafka_client import groupless_consumer

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0


async def fetch_high_watermarks(
    consumer_kwargs: Mapping[str, Any], partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """The high watermark of each partition, read from a Fetch response of a throw-away consumer
    (no group, no commits), starting at the ListOffsets answer, which is never above the truth."""
    tps = list(partitions)
    if not tps:
        return {}
    async with groupless_consumer(
        consumer_kwargs, fetch_max_bytes=1024 * 1024, max_partition_fetch_bytes=64 * 1024
    ) as consumer:
        lower = await consumer.end_offsets(tps)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, lower[tp])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FETCH_TIMEOUT_S
        result: dict[TopicPartition, int] = {}
        while len(result) < len(tps):
            await consumer.getmany(timeout_ms=200)
            for tp in tps:
                hw = consumer.highwater(tp)
                if hw is not None:
                    result[tp] = max(hw, lower[tp])
            if loop.time() > deadline:
                missing = [tp for tp in tps if tp not in result]
                log.warning("no fetch high watermark for %s; using ListOffsets", missing)
                for tp in missing:
                    result[tp] = lower[tp]
                break
        return result
