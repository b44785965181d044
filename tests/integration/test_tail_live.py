"""`stream-app tail` against the test broker and a real worker: it prints the aggregates the
worker published and the dead letter of a bad line, new records only unless --from-beginning,
ends by itself with --max/--timeout and on Ctrl-C, and joins no consumer group."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from stream_app.core.replay import replay_lines
from stream_app.service.kafka_client import client_kwargs, ensure_topics
from stream_app.service.settings import Settings
from stream_app.terminal.records import aggregate_line
from tests.helpers import A_GRADE_DROP, SAMPLE_FILE
from tests.integration.conftest import NAMESPACED
from tests.integration.harness import (
    Broker,
    Worker,
    outputs_equal_replay,
    produce_lines,
    records,
    settings_for,
    wait_until,
)

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()


class Tail:
    """`stream-app tail` as a user runs it, pointed at the test broker with --broker."""

    def __init__(self, tmp_path: Path, broker: Broker, *args: str) -> None:
        self.out = tmp_path / f"tail-{os.urandom(4).hex()}.out"
        self.err = self.out.with_suffix(".err")
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "stream_app", "tail", *args, "--broker", broker.url],
                # The flag, not the environment, must name the broker.
                env={**os.environ, "EVALSTREAM_BROKER_URL": "127.0.0.1:1"},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines()

    def notes(self) -> str:
        return self.err.read_text()


def dead_letters(settings: Settings) -> int:
    return len(records(settings, settings.topics.dead_letter))


async def consumer_groups(settings: Settings) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**client_kwargs(settings))
    await admin.start()
    try:
        return sorted(group[0] for group in await admin.list_consumer_groups())
    finally:
        await admin.close()


def test_tail_prints_aggregates_and_dead_letters(
    tmp_path: Path, broker: Broker, workers: list[Worker]
) -> None:
    settings = settings_for(broker)
    groups_before = asyncio.run(consumer_groups(settings))  # the broker may be shared
    worker = Worker(broker, tmp_path, "worker").start()
    workers.append(worker)
    worker.wait_ready(timeout=90)

    # A first bad line, on the DLQ before the default tail starts: it must not be printed.
    produce_lines(settings, [b"first bad line"])
    wait_until(lambda: dead_letters(settings) == 1, timeout=60, what="the first dead letter")
    new_only = Tail(tmp_path, broker, "dlq", "--max", "1", "--timeout", "90")
    wait_until(lambda: "new records only" in new_only.notes(), timeout=30, what="tail to start")

    produce_lines(settings, [*SAMPLE, b'{"run_id": "broken", \x00 second bad line'])
    assert new_only.wait(90) == 0, new_only.notes()
    [letter] = new_only.lines()
    assert letter.startswith("invalid_json  ")
    assert 'bytes: \'{"run_id": "broken", \\x00 second bad line\'' in letter
    assert "first bad line" not in letter

    wait_until(lambda: outputs_equal_replay(settings, SAMPLE), timeout=120, what="the outputs")
    everything = Tail(tmp_path, broker, "aggregates", "--from-beginning", "--timeout", "5")
    assert everything.wait(60) == 0, everything.notes()
    assert "from the beginning" in everything.notes()
    last: dict[str, str] = {}
    for line in everything.lines():
        key, _, rest = line.partition("  ")
        last[key] = rest
    expected = {  # what tail prints of replay's aggregates: the worker's are the same
        f"{agg.experiment_id}/{agg.tier}": aggregate_line(agg).partition("  ")[2]
        for agg in replay_lines(SAMPLE, settings).tiers
    }
    assert last == expected

    dlq = settings.topics.dead_letter
    as_json = Tail(tmp_path, broker, dlq, "--from-beginning", "--json", "--max", "2")
    assert as_json.wait(60) == 0, as_json.notes()
    letters = [json.loads(line) for line in as_json.lines()]
    assert [d["topic"] for d in letters] == [dlq] * 2
    assert sorted(d["value"]["payload"] for d in letters) == [
        "first bad line",
        '{"run_id": "broken", \x00 second bad line',
    ]
    assert {d["value"]["reason"] for d in letters} == {"invalid_json"}

    # Ctrl-C ends a tail that has nothing to stop it otherwise.
    endless = Tail(tmp_path, broker, "grades")
    wait_until(lambda: "new records only" in endless.notes(), timeout=30, what="tail to start")
    endless.process.send_signal(signal.SIGINT)
    assert endless.wait(15) == 0, endless.notes()
    assert "Traceback" not in endless.notes()

    # No tail joined a group or committed anything: the worker's group is the only new one.
    # Made since: the worker's group, and none of tail's; the groups of other tests on the
    # shared broker (each named for its own namespace) come and go meanwhile.
    groups = set(asyncio.run(consumer_groups(settings))) - set(groups_before)
    others = {g for g in groups if NAMESPACED.match(g) and not g.startswith(settings.app_id)}
    assert sorted(groups - others) == [settings.app_id]


def test_timeout_before_max_is_exit_status_1(
    tmp_path: Path, broker: Broker, workers: list[Worker]
) -> None:
    settings = settings_for(broker)
    produce_lines(settings, [])  # creates the topics
    waiting = Tail(tmp_path, broker, "reports", "--max", "1", "--timeout", "3")
    assert waiting.wait(30) == 1
    assert waiting.lines() == []
    assert "0 of 1 records within 3 s" in waiting.notes()


async def create_and_produce(settings: Settings, topic: str, value: bytes) -> None:
    """Create `topic` (all its partitions), then write one record to its last partition."""
    from aiokafka import AIOKafkaProducer

    await ensure_topics(settings, [topic])
    producer = AIOKafkaProducer(**client_kwargs(settings))
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=b"exp/T5", partition=settings.partitions - 1)
    finally:
        await producer.stop()


def test_a_topic_created_after_tail_started_is_read_from_its_start_at_once(
    tmp_path: Path, broker: Broker
) -> None:
    settings = settings_for(broker)
    change = A_GRADE_DROP
    waiting = Tail(tmp_path, broker, "grades", "--max", "1", "--timeout", "30")
    wait_until(lambda: "does not exist yet" in waiting.notes(), timeout=30, what="tail to wait")

    value = change.model_dump_json().encode()
    asyncio.run(create_and_produce(settings, settings.topics.grade_changes, value))
    created = time.monotonic()
    assert waiting.wait(40) == 0, waiting.notes()
    # Found at the next look (every half second), not at aiokafka's metadata refresh (5 min).
    assert time.monotonic() - created < 10, waiting.notes()
    assert waiting.lines() == [
        "exp/T5  B→D  drop  median composite 0.612  run exp/T5/07/run_02  "
        "at 2026-01-05T09:00:00+00:00"
    ]
    assert "grade-changes from the beginning" in waiting.notes()
    # tail created no topic while it waited: of the test's topics the broker (which may be
    # shared) holds only the one made above.
    ours = set(settings.topics.model_dump().values())
    assert sorted(ours & set(asyncio.run(topic_names(settings)))) == [settings.topics.grade_changes]


async def topic_names(settings: Settings) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**client_kwargs(settings))
    await admin.start()
    try:
        return sorted(await admin.list_topics())
    finally:
        await admin.close()
