"""Publishing events (raw lines of a file, or synthetic runs) to the input topic, for
`stream-app produce`, the demo and the tests: keyed by `experiment_id` when the line has one, at
an optional steady rate, with progress. The worker partitions by experiment: keyed so, an
experiment's runs reach it in the file's order, and what depends on arrival order (grade changes,
totals, the drop detectors) equals `stream-app replay` of the file."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterable
from typing import TextIO

from aiokafka import AIOKafkaProducer

from stream_app import bounded_json
from stream_app.service import topology
from stream_app.service.kafka_client import client_kwargs, wait_for_broker
from stream_app.service.settings import Settings


def experiment_key(line: bytes) -> bytes | None:
    """The experiment_id as the message key, when the line is an object with one."""
    try:
        value = bounded_json.loads(line)
    except (ValueError, RecursionError):
        return None
    experiment = value.get("experiment_id") if isinstance(value, dict) else None
    return experiment.encode(errors="surrogatepass") if isinstance(experiment, str) else None


async def produce(
    settings: Settings,
    lines: Iterable[bytes],
    *,
    rate: float | None = None,
    total: int | None = None,
    progress: TextIO | None = sys.stderr,
    create_topics: bool = True,
) -> int:
    """Feed the input topic (demo, tests, load): send every non-blank line; returns the count."""
    await wait_for_broker(settings)
    if create_topics:
        await topology.create_topics(settings)
    producer = AIOKafkaProducer(**client_kwargs(settings), acks="all", linger_ms=5)
    await producer.start()
    sent = 0
    started = last_report = time.monotonic()
    try:
        for raw in lines:
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            await producer.send(settings.topics.input, value=line, key=experiment_key(line))
            sent += 1
            now = time.monotonic()
            if rate:
                ahead = started + sent / rate - now
                if ahead > 0:
                    await asyncio.sleep(ahead)
            if progress is not None and now - last_report >= 1.0:
                last_report = now
                of = f"/{total:,}" if total else ""
                speed = sent / max(now - started, 1e-9)
                print(f"produced {sent:,}{of} ({speed:,.0f}/s)", file=progress, flush=True)
        await producer.flush()
    finally:
        await producer.stop()
    if progress is not None:
        elapsed = time.monotonic() - started
        print(f"produced {sent:,} events in {elapsed:.1f} s", file=progress, flush=True)
    return sent
