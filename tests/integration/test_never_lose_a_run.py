"""Issue 9 against a real worker on the test broker: a poison event costs only itself, a
poisoned stored state cannot wedge recovery, a dead letter always fits, and a send that fails
stops the worker before its batch is committed, so a restart loses nothing."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from stream_app.core.replay import replay_lines
from stream_app.service.kafka_client import client_kwargs, ensure_topics
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import Settings
from stream_app.sources.producer import experiment_key
from tests.helpers import SAMPLE_FILE, encode, make_event
from tests.integration import faulty_worker
from tests.integration.harness import (
    Broker,
    Worker,
    assert_grade_change_chains,
    expected_outputs,
    outputs_equal_replay,
    records,
    settings_for,
    wait_out_dead_member,
    wait_until,
)

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()
FAULTY = [sys.executable, str(Path(__file__).with_name("faulty_worker.py"))]


async def _send(
    settings: Settings, messages: list[tuple[str | None, bytes]], partition: int | None = 0
) -> None:
    producer = AIOKafkaProducer(
        **client_kwargs(settings), acks="all", max_request_size=4 * 1024 * 1024
    )
    await producer.start()
    try:
        for topic, value in messages:
            # Spread over the partitions (partition None) the way `produce` does it, keyed by
            # experiment: an experiment's runs then arrive in the order sent, and the totals and
            # drop detectors (which depend on that order) can equal replay's.
            key = experiment_key(value) if partition is None else None
            await producer.send(
                topic or settings.topics.input, value=value, key=key, partition=partition
            )
        await producer.flush()
    finally:
        await producer.stop()


def send(settings: Settings, values: list[bytes]) -> None:
    """Every value to partition 0 of the input, in one burst: they meet in the same batches."""
    asyncio.run(_send(settings, [(None, v) for v in values]))


def good_runs(n: int, experiment: str = "good", tier: str = "T1") -> list[bytes]:
    return [
        encode(
            make_event(
                run_id=f"{experiment}/{tier}/run_{i:02d}",
                experiment_id=experiment,
                tier=tier,
                passed=i % 3 != 0,
                completed_at=f"2026-01-05T10:{i:02d}:00Z",
            )
        )
        for i in range(n)
    ]


def dead_letters(settings: Settings) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in records(settings, settings.topics.dead_letter)]


def at_least(settings: Settings, n: int) -> list[dict[str, Any]] | None:
    """The dead letters once there are `n` of them."""
    letters = dead_letters(settings)
    return letters if len(letters) >= n else None


def payload_of(letter: dict[str, Any]) -> bytes:
    if letter["payload_encoding"] == "base64":
        return base64.b64decode(letter["payload"])
    return str(letter["payload"]).encode()


def metric(worker: Worker, name: str, **labels: str) -> float:
    return worker.metrics().get((name, tuple(sorted(labels.items()))), 0.0)


def start(broker: Broker, workers: list[Worker], tmp: Path, name: str, **kw: Any) -> Worker:
    worker = Worker(broker, tmp, name, **kw).start()
    workers.append(worker)
    return worker.wait_ready()


def test_events_that_overflowed_the_core_are_rejected_alone(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """Cases 1 and 5: costs whose statistics overflowed, timestamps whose conversion overflowed,
    and timestamps looser than RFC 3339, among 12 valid runs of another tier in one batch."""
    settings = settings_for(broker)
    worker = start(broker, workers, tmp_path, "w")
    assert worker.process is not None
    pid = worker.process.pid
    poison = [
        encode(make_event(run_id="p/cost0", experiment_id="p", cost_usd=0.0)),
        encode(make_event(run_id="p/cost1e155", experiment_id="p", cost_usd=1e155)),
        encode(make_event(run_id="p/cost-max", experiment_id="p", cost_usd=1.7e308)),
        encode(make_event(run_id="p/y1", started_at="0001-01-01T00:00:00+14:00")),
        encode(make_event(run_id="p/y9999", completed_at="9999-12-31T23:59:59-12:00")),
        encode(make_event(run_id="p/epoch", started_at="1767603660", completed_at="0")),
        encode(make_event(run_id="p/ms", completed_at="1767603660000")),
        encode(make_event(run_id="p/space", completed_at="2026-01-05 09:01:00Z")),
        encode(make_event(run_id="p/nosec", completed_at="2026-01-05T09:01Z")),
    ]
    good = good_runs(12)
    lines = [v for pair in zip(good, [*poison, *[b""] * 3], strict=True) for v in pair if v]
    send(settings, lines)

    wait_until(lambda: outputs_equal_replay(settings, lines), 60, what="outputs equal replay")
    letters = wait_until(
        lambda: at_least(settings, len(poison) - 1),
        60,
        what="the dead letters",
    )
    by_payload = {payload_of(letter): letter for letter in letters}
    # Cost 0 is valid; every other poison event is a schema rejection with its exact bytes.
    assert set(by_payload) == set(poison[1:])
    assert {letter["reason"] for letter in letters} == {"schema"}
    aggs, _ = expected_outputs(settings, lines)
    assert aggs[b"good/T1"]["run_ids"] == [f"good/T1/run_{i:02d}" for i in range(2, 12)]
    assert metric(worker, "evalstream_runs_accepted_total") == 12 + 1  # and p/cost0
    assert metric(worker, "evalstream_runs_rejected_total", reason="schema") == len(poison) - 1
    assert worker.process.pid == pid
    worker.assert_alive()
    assert "Traceback" not in worker.log()


def test_an_exception_in_the_core_dead_letters_that_event_only_and_replay_agrees(
    broker: Broker,
    workers: list[Worker],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Per-event isolation in the validate and window stages, with a defect injected into the
    core; replay under the same defect rejects the same runs."""
    settings = settings_for(broker)
    worker = start(broker, workers, tmp_path, "w", command=FAULTY, FAULT_POISON_PREFIX="bad")
    assert worker.process is not None
    pid = worker.process.pid
    good = good_runs(8) + good_runs(6, tier="T2")
    bad_validate = encode(make_event(run_id="bad-validate-1", experiment_id="good"))
    bad_window = encode(
        make_event(
            run_id="bad-window-1",
            experiment_id="good",
            tier="T1",
            completed_at="2026-01-05T10:03:30Z",
        )
    )
    lines = [*good[:4], bad_validate, *good[4:9], bad_window, *good[9:]]
    send(settings, lines)

    letters = wait_until(lambda: at_least(settings, 2), 60, what="dead letters")
    assert len(letters) == 2
    by_stage = {letter["detail"]["stage"]: letter for letter in letters}
    assert {letter["reason"] for letter in letters} == {"processing_error"}
    assert by_stage["validate"]["detail"]["error"] == "OverflowError: injected: per-run metrics"
    assert payload_of(by_stage["validate"]) == bad_validate  # the bytes the stage received
    assert by_stage["validate"]["origin"]["topic"] == settings.topics.input
    window_letter = by_stage["window"]
    assert window_letter["detail"]["error"] == "OverflowError: injected: window aggregate"
    assert window_letter["origin"]["topic"] == settings.topics.runs_by_tier
    assert json.loads(payload_of(window_letter))["run_id"] == "bad-window-1"  # its RunMetrics

    # Replay under the same defect rejects the same two runs, and the outputs agree.
    faulty_worker.install_poison("bad", monkeypatch.setattr)
    report = replay_lines(lines, settings)
    monkeypatch.undo()
    expected = {
        f"{a.experiment_id}/{a.tier}".encode(): json.loads(a.model_dump_json())
        for a in report.tiers
    }
    rejected = {json.loads(lines[r.line - 1])["run_id"] for r in report.rejected}
    assert rejected == {"bad-validate-1", "bad-window-1"}
    assert {r.reason for r in report.rejected} == {"processing_error"}

    def aggregates_match() -> bool:
        latest = {r.key: json.loads(r.value) for r in records(settings, settings.topics.aggregates)}
        return latest == expected

    wait_until(aggregates_match, 60, what="aggregates equal replay under the same defect")
    assert expected[b"good/T1"]["run_ids"] == [f"good/T1/run_{i:02d}" for i in range(8)]
    assert metric(worker, "evalstream_runs_accepted_total") == 8 + 6
    assert metric(worker, "evalstream_runs_rejected_total", reason="processing_error") == 2
    assert worker.process.pid == pid
    worker.assert_alive()


def test_a_poisoned_stored_state_is_quarantined_and_the_worker_becomes_ready(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """Case 2: states that cannot be loaded or aggregated sit in both changelogs before the
    worker starts. It becomes ready, dead-letters each with `state_error` and its bytes, resets
    the key, and a new run of that tier starts a fresh window."""
    settings = settings_for(broker)
    windows_log = f"{settings.app_id}-tier-windows-changelog"
    experiments_log = f"{settings.app_id}-experiment-tiers-changelog"
    asyncio.run(ensure_topics(settings, [windows_log, experiments_log]))
    poisoned = {
        (windows_log, b"poison/T1"): b'{"v":1,"window":[[1,"r",1,1,NaN,1,1,1]],"grade":null}',
        (windows_log, b"poison/T2"): b"\x00\xff not json",
        (windows_log, b"poison/T3"): (
            b'{"v":1,"window":[[-62135596800000000,"r",1,1,1,1,1,1]],"grade":null}'
        ),
        (experiments_log, b"poison"): b'{"T1": [1, 2]}',
    }

    async def plant() -> None:
        producer = AIOKafkaProducer(**client_kwargs(settings), acks="all")
        await producer.start()
        try:
            for (topic, key), value in poisoned.items():
                experiment = key.rpartition(b"/")[0] if topic == windows_log else key
                partition = partition_for(experiment, settings.partitions)
                await producer.send(topic, value=value, key=key, partition=partition)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(plant())
    worker = start(broker, workers, tmp_path, "w")  # ready: nothing wedged
    letters = wait_until(
        lambda: at_least(settings, len(poisoned)),
        60,
        what="a state_error per poisoned state",
    )
    assert len(letters) == len(poisoned)
    for letter in letters:
        assert letter["reason"] == "state_error"
        key = letter["origin"]["key"].encode()
        topic = letter["origin"]["topic"]
        assert payload_of(letter) == poisoned[(topic, key)]
    tables = {letter["detail"]["table"] for letter in letters}
    assert tables == {"tier-windows", "experiment-tiers"}
    assert metric(worker, "evalstream_state_quarantined_total", table="tier-windows") == 3
    assert metric(worker, "evalstream_state_quarantined_total", table="experiment-tiers") == 1

    fresh = [encode(make_event(run_id="poison/T1/new", experiment_id="poison", tier="T1"))]
    send(settings, fresh)
    wait_until(lambda: outputs_equal_replay(settings, fresh), 60, what="a fresh window")

    # The reset is durable: a restarted worker finds nothing to quarantine.
    worker.stop()
    again = start(broker, workers, tmp_path, "again")
    wait_until(lambda: outputs_equal_replay(settings, fresh), 60, what="recovered outputs")
    assert len(dead_letters(settings)) == len(poisoned)
    assert metric(again, "evalstream_state_quarantined_total", table="tier-windows") == 0


def test_a_dead_letter_that_would_be_too_large_is_cut_and_the_batch_goes_on(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """Case 4: 1,000,000 bytes of 0x01 (under max_message_bytes) escape to 6 MB of JSON."""
    settings = settings_for(broker)
    worker = start(broker, workers, tmp_path, "w")
    assert worker.process is not None
    pid = worker.process.pid
    huge = b"\x01" * 1_000_000
    good = good_runs(10)
    lines = [*good[:5], huge, *good[5:]]
    send(settings, lines)
    letters = wait_until(lambda: dead_letters(settings), 60, what="the dead letter")
    assert len(letters) == 1
    letter = letters[0]
    assert letter["reason"] == "invalid_json"
    assert letter["truncated"] is True
    assert letter["payload_size"] == len(huge)
    assert letter["payload_sha256"] == hashlib.sha256(huge).hexdigest()
    assert huge.startswith(payload_of(letter))
    record = records(settings, settings.topics.dead_letter)[0]
    assert len(record.value) < 1024 * 1024  # fits Apache Kafka's default message limit
    valid = [*good]
    wait_until(lambda: outputs_equal_replay(settings, valid), 60, what="the 10 valid runs")
    assert metric(worker, "evalstream_runs_rejected_total", reason="invalid_json") == 1
    assert worker.process.pid == pid
    worker.assert_alive()


@pytest.mark.parametrize(
    ("topic", "how"),
    [
        ("aggregates", "raise"),
        ("runs_by_tier", "raise"),
        ("aggregates", "ack"),  # refused by the broker after the send returned
        ("dead_letter", "ack"),
    ],
)
def test_a_failed_send_stops_the_worker_before_commit_and_a_restart_loses_nothing(
    broker: Broker, workers: list[Worker], tmp_path: Path, topic: str, how: str
) -> None:
    settings = settings_for(broker)
    faulty = start(
        broker,
        workers,
        tmp_path,
        "faulty",
        command=FAULTY,
        FAULT_FAIL_SEND_TOPIC=getattr(settings.topics, topic),
        # runs-by-tier carries a bundle per partition per batch: a batch sends at most four
        FAULT_FAIL_SEND_AFTER={"aggregates": "5", "runs_by_tier": "2"}.get(topic, "1"),
        FAULT_FAIL_SEND_HOW=how,
    )
    lines = [*SAMPLE[:100], b"not json", *SAMPLE[100:]]
    asyncio.run(_send(settings, [(None, v) for v in lines], partition=None))
    assert faulty.process is not None
    code = faulty.process.wait(60)
    wait_out_dead_member(broker, settings)
    assert code == 70, faulty.log()
    log = faulty.log()
    assert log.count("evalstream: stopping:") == 1
    assert "injected failure of send #" in log
    second = start(broker, workers, tmp_path, "second")
    wait_until(lambda: outputs_equal_replay(settings, lines), 90, what="outputs equal replay")
    assert_grade_change_chains(settings, lines)
    letters = wait_until(lambda: dead_letters(settings), 30, what="the dead letter")
    assert b"not json" in {payload_of(letter) for letter in letters}
    second.assert_alive()
