"""The bad input corpus through a live worker: the right DLQ reason, the original bytes exactly,
the counters right, the worker never restarts, valid events around the bad ones processed."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from stream_app.service.kafka_client import client_kwargs
from stream_app.service.settings import Settings
from tests.helpers import CORPUS_MAX_BYTES, SAMPLE_FILE, corpus_stream
from tests.integration.harness import (
    Broker,
    Worker,
    expected_outputs,
    outputs_equal_replay,
    records,
    settings_for,
    wait_until,
)

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()


async def send(settings: Settings, messages: list[tuple[bytes | None, bytes]]) -> None:
    """Every message to partition 0, in order (the duplicate and late cases depend on order)."""
    producer = AIOKafkaProducer(**client_kwargs(settings), acks="all")
    await producer.start()
    try:
        for key, value in messages:
            await producer.send(settings.topics.input, value=value, key=key, partition=0)
        await producer.flush()
    finally:
        await producer.stop()


def test_corpus_through_a_live_worker(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    worker = Worker(
        broker, tmp_path, "corpus", EVALSTREAM_MAX_MESSAGE_BYTES=str(CORPUS_MAX_BYTES)
    ).start()
    workers.append(worker)
    worker.wait_ready()
    assert worker.process is not None
    pid = worker.process.pid
    settings = settings_for(broker, max_message_bytes=CORPUS_MAX_BYTES)
    stream = corpus_stream()
    messages: list[tuple[bytes | None, bytes]] = [(None, line) for line in SAMPLE[:120]]
    messages += [
        (None if e["null_key"] else f"corpus-{e['name']}".encode(), raw) for e, raw in stream
    ]
    messages += [(None, line) for line in SAMPLE[120:]]
    asyncio.run(send(settings, messages))

    rejections = [e for e, _ in stream if e["expected"] not in ("accepted", "duplicate", "late")]
    letters = wait_until(
        lambda: (
            (r := records(settings, settings.topics.dead_letter))
            and len(r) >= len(rejections)
            and r
        ),
        timeout=60,
        what="every rejection on the DLQ",
    )
    assert len(letters) == len(rejections)
    by_key: dict[str, dict[str, Any]] = {}
    for record in letters:
        letter = json.loads(record.value)
        by_key[letter["origin"]["key"]] = letter
        raw = (
            base64.b64decode(letter["payload"])
            if letter["payload_encoding"] == "base64"
            else letter["payload"].encode()
        )
        assert len(raw) == letter["payload_size"]
        assert record.key == letter["origin"]["key"].encode()
    originals = {f"corpus-{e['name']}": raw for e, raw in stream}
    for entry in rejections:
        key = f"corpus-{entry['name']}"
        letter = by_key[key]
        assert letter["reason"] == entry["expected"], entry["name"]
        raw = (
            base64.b64decode(letter["payload"])
            if letter["payload_encoding"] == "base64"
            else letter["payload"].encode()
        )
        assert raw == originals[key], f"{entry['name']}: payload not byte-exact"
        assert letter["truncated"] is False
        assert letter["payload_sha256"] == hashlib.sha256(raw).hexdigest()
        assert letter["origin"]["topic"] == settings.topics.input
        assert letter["origin"]["partition"] == 0

    # Valid events around the bad ones: outputs equal replay of everything that was sent.
    all_lines = [value for _, value in messages]
    wait_until(
        lambda: outputs_equal_replay(settings, all_lines), 60, what="outputs equal to replay"
    )
    aggs, _ = expected_outputs(settings, all_lines)
    corpus_tier = aggs[b"corpus/T1"]
    assert corpus_tier["run_ids"] == [f"corpus/late-window-{i}" for i in range(10)]
    unpriced = aggs[b"corpus/T9"]  # a model no source prices: its tier is kept, costs unknown
    assert (unpriced["runs"], unpriced["cost_usd"], unpriced["cost_of_pass"]) == (1, None, None)

    # The duplicate and late cases change no output: wait for the counters themselves.
    wait_until(
        lambda: (
            worker.metrics().get(("evalstream_processing_seconds_count", (("stage", "window"),)))
            == len(messages) - len(rejections)
        ),
        60,
        what="every accepted message through the window stage",
    )
    m = worker.metrics()
    expected_reasons = Counter(e["expected"] for e in rejections)
    for reason in ("invalid_json", "schema", "too_large"):
        assert (
            m[("evalstream_runs_rejected_total", (("reason", reason),))] == expected_reasons[reason]
        )
    assert m[("evalstream_runs_ignored_total", (("reason", "duplicate"),))] == 1
    assert m[("evalstream_runs_ignored_total", (("reason", "late"),))] == 1
    assert m[("evalstream_runs_received_total", ())] == len(messages)
    # The worker never restarted.
    worker.assert_alive()
    assert worker.process.pid == pid
    assert "Traceback" not in worker.log()
