"""Real processes for the integration tests: a broker (Apache Kafka by default, the embedded Tansu
with EVALSTREAM_TEST_BROKER=tansu) and `stream-app worker` subprocesses on loopback. Every process
started here is stopped by PID, even when a test fails."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import create_conn
from aiokafka.protocol.admin import DescribeGroupsRequest
from aiokafka.protocol.group import HeartbeatRequest

from stream_app.brokers import BrokerError
from stream_app.brokers.kafka import ApacheKafka, find_kafka
from stream_app.brokers.tansu import EmbeddedBroker, find_tansu
from stream_app.core.replay import replay_lines
from stream_app.processes.worker_process import WorkerExited, WorkerProcess
from stream_app.service.kafka_client import client_kwargs, groupless_consumer, topic_partitions
from stream_app.service.settings import Settings, load_settings
from stream_app.sources.producer import produce

T = TypeVar("T")
PARTITIONS = 4
Broker = EmbeddedBroker | ApacheKafka
BROKERS = ("kafka", "tansu")
TEST_BROKER = os.environ.get("EVALSTREAM_TEST_BROKER", "kafka")
"""The one switch: which broker the integration tests run on. Apache Kafka (the production
target) by default; `tansu` runs them on the demo's embedded broker."""
if TEST_BROKER not in BROKERS:
    raise ValueError(f"EVALSTREAM_TEST_BROKER={TEST_BROKER!r}: use one of {', '.join(BROKERS)}")


def _required(what: str, check: Callable[[], object]) -> None:
    """Skip without the broker, except in CI where a missing broker is a failure."""
    try:
        check()
    except BrokerError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs {what}: {exc}")
        pytest.skip(str(exc))


def require_tansu() -> None:
    """The embedded broker (the demo's), whatever the test broker is."""
    _required("the embedded broker", find_tansu)


def require_broker(kind: str = TEST_BROKER) -> None:
    """The test broker: Apache Kafka's jars and java, or Tansu."""
    if kind == "tansu":
        require_tansu()
    else:
        _required("Apache Kafka (scripts/install-kafka.sh)", find_kafka)


def make_broker(
    log_file: Path,
    port: int | None = None,
    advertised_port: int | None = None,
    kind: str = TEST_BROKER,
) -> Broker:
    """A test broker, not started (`start()`, or use it as a context manager)."""
    require_broker(kind)
    if kind == "tansu":
        return EmbeddedBroker(port=port, log_file=log_file, advertised_port=advertised_port)
    return ApacheKafka(port=port, log_file=log_file, advertised_port=advertised_port)


def wait_until(
    check: Callable[[], T | Literal[False] | None],
    timeout: float,
    interval: float = 0.25,
    what: str = "",
) -> T:
    """Poll `check` until it returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last  # type: ignore[no-any-return]
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what or check}: {last!r}")


async def _group_members(broker: Broker, group: str) -> list[str]:
    conn = await create_conn(broker.host, broker.port)
    try:
        # Tansu drops a member whose session ran out only when a request of its group comes in
        # (DescribeGroups is not one): a heartbeat of no member, refused (UNKNOWN_MEMBER_ID) once
        # the expired members are gone. Apache Kafka expires them itself; the heartbeat is moot.
        await conn.send(HeartbeatRequest(group, -1, ""))
        response = await conn.send(DescribeGroupsRequest([group]))
    finally:
        conn.close()
    return [
        member["member_id"]
        for described in response.to_object()["groups"]
        for member in described["members"]
    ]


def group_members(broker: Broker, group: str) -> list[str]:
    """The member ids of consumer group `group` as the broker itself has them now: asked at its
    own port, past any proxy in front of it, after its coordinator has dropped every member
    whose session ran out."""
    return asyncio.run(_group_members(broker, group))


def wait_until_group_empty(broker: Broker, settings: Settings, what: str, slack: float) -> None:
    """Wait until the broker's coordinator has no member left in the workers' group (its id is
    the app id): a worker that stopped heartbeating is dropped `session_timeout_s` after its
    last heartbeat; `slack` more seconds at most."""

    def empty() -> bool | Mismatch:
        members = group_members(broker, settings.app_id)
        return Mismatch(f"members {members}") if members else True

    wait_until(empty, settings.session_timeout_s + slack, interval=0.5, what=what)


def post_alerts(alertmanager: str, alerts: list[dict[str, Any]]) -> None:
    """Post `alerts` to Alertmanager's API, as Prometheus would."""
    request = urllib.request.Request(
        alertmanager + "/api/v2/alerts",
        data=json.dumps(alerts).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def wait_out_dead_member(broker: Broker, settings: Settings) -> None:
    """Let the group forget a worker that died without leaving it (SIGKILL, exit 70), as a
    supervisor's back-off would, before its replacement starts: on Tansu only. It is forgotten
    once the broker has no member left in the group: the dead one was its only member.

    Tansu keeps such a member until its session times out, and a replacement that joins before
    then first shares the partitions with it. Apache Kafka's coordinator holds the replacement's
    join until the dead member's session expires, so the replacement starts from one clean
    assignment without a wait here.
    """
    if isinstance(broker, EmbeddedBroker):
        wait_until_group_empty(broker, settings, "the group to forget the dead worker", 10)


def settings_for(broker: Broker, **overrides: Any) -> Settings:
    return load_settings(broker_url=broker.url, partitions=PARTITIONS, **overrides)


class Worker(WorkerProcess):
    """The shared `WorkerProcess` on the test broker, with the tests' conveniences: failures are
    assertion errors that show the worker's log."""

    def __init__(
        self,
        broker: Broker,
        workdir: Path,
        name: str,
        command: list[str] | None = None,
        *,
        port: int | None = None,
        **env: str,
    ) -> None:
        super().__init__(
            workdir,
            name,
            broker_url=broker.url,
            partitions=PARTITIONS,
            command=command,
            port=port,
            env=env,
        )

    def check_alive(self) -> None:
        assert self.process is not None, f"{self.name} was never started"
        try:
            super().check_alive()
        except WorkerExited as exc:
            raise AssertionError(f"{self.name} exited {exc.returncode}:\n{self.log()}") from None

    def assert_alive(self) -> None:
        self.check_alive()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:] if self.log_path.exists() else ""


def produce_lines(settings: Settings, lines: Iterable[bytes], rate: float | None = None) -> int:
    return asyncio.run(produce(settings, list(lines), rate=rate, progress=None))


async def read_topic(settings: Settings, topic: str, timeout_s: float = 30.0) -> list[Any]:
    """Every record of `topic` from the beginning up to its high watermark, as reported by the
    fetch responses themselves (ListOffsets can be wrong on the embedded broker). No group."""
    admin = AIOKafkaAdminClient(**client_kwargs(settings))
    await admin.start()
    try:
        partitions = sorted(await topic_partitions(admin, topic))
    finally:
        await admin.close()
    if not partitions:
        return []
    records: list[Any] = []
    async with groupless_consumer(settings) as consumer:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            batch = await consumer.getmany(timeout_ms=300)
            for messages in batch.values():
                records.extend(messages)
            done = True
            for tp in tps:
                highwater = consumer.highwater(tp)
                if highwater is None or await consumer.position(tp) < highwater:
                    done = False
            if done:
                return records
            if loop.time() > deadline:
                raise TimeoutError(f"could not read {topic} to its end within {timeout_s} s")


def last_by_key(records: Iterable[Any]) -> dict[bytes, bytes]:
    """The latest value of every key (records in offset order within a partition), as a
    compacted topic keeps them: a key whose latest record is a tombstone is gone."""
    latest: dict[bytes, bytes] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        if record.value is None:
            latest.pop(record.key, None)
        else:
            latest[record.key] = record.value
    return latest


def latest(settings: Settings, topic: str) -> dict[bytes, Any]:
    """Last message per key of a topic, decoded from JSON."""
    records = asyncio.run(read_topic(settings, topic))
    return {k: json.loads(v) for k, v in last_by_key(records).items()}


def records(settings: Settings, topic: str) -> list[Any]:
    return asyncio.run(read_topic(settings, topic))


Expected = tuple[dict[bytes, Any], dict[bytes, Any], dict[bytes, Any]]
_REPLAYED: dict[tuple[str, tuple[bytes, ...]], Expected] = {}


def _replayed(settings: Settings, lines: Iterable[bytes]) -> Expected:
    """`replay`'s last aggregate, cross-tier report and suite tier of every key, made once per
    settings and lines: a test polls these every second or two, and replaying 20,000 runs costs
    seconds of the machine the worker under test needs. Read-only to callers."""
    key = (settings.model_dump_json(), tuple(lines))
    if key not in _REPLAYED:
        report = replay_lines(key[1], settings)
        _REPLAYED.clear()  # one test's lines at a time: a test compares against one history
        _REPLAYED[key] = (
            {f"{a.experiment_id}/{a.tier}".encode(): json.loads(a.model_dump_json())
             for a in report.tiers},
            {c.experiment_id.encode(): json.loads(c.model_dump_json()) for c in report.cross_tier},
            {f"{s.suite}/{s.tier}".encode(): json.loads(s.model_dump_json())
             for s in report.suites},
        )  # fmt: skip
    return _REPLAYED[key]


def expected_outputs(
    settings: Settings, lines: Iterable[bytes]
) -> tuple[dict[bytes, Any], dict[bytes, Any]]:
    """What `replay` says the last aggregate and cross-tier report of every key must be."""
    aggs, cross, _ = _replayed(settings, lines)
    return aggs, cross


class Mismatch:
    """A falsy answer that says what differs (shown when a wait times out)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return self.text


def _differences(expected: dict[bytes, Any], got: dict[bytes, Any]) -> list[str]:
    keys = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
    out = []
    for key in keys[:6]:
        want, have = expected.get(key) or {}, got.get(key) or {}
        fields = sorted(f for f in want.keys() | have.keys() if want.get(f) != have.get(f))
        shown = ", ".join(
            f"{f} want {str(want.get(f))[:120]} have {str(have.get(f))[:120]}" for f in fields[:3]
        )
        out.append(f"{key.decode()}: {len(fields)} fields differ: {shown}")
    return [f"{len(keys)} keys differ", *out] if keys else []


def expected_suites(settings: Settings, lines: Iterable[bytes]) -> dict[bytes, Any]:
    """What `replay` says the last state of every suite's tier must be."""
    return _replayed(settings, lines)[2]


def outputs_equal_replay(settings: Settings, lines: list[bytes]) -> bool | Mismatch:
    """True when the latest aggregate and report of every key, and the latest state of every
    suite's tier, are replay's; else what differs."""
    aggs, cross = expected_outputs(settings, lines)
    suites = expected_suites(settings, lines)
    got_aggs = latest(settings, settings.topics.aggregates)
    got_cross = latest(settings, settings.topics.cross_tier)
    got_suites = latest(settings, settings.topics.suite_tiers)
    if got_aggs == aggs and got_cross == cross and got_suites == suites:
        return True
    return Mismatch(
        "; ".join(
            _differences(aggs, got_aggs)
            + _differences(cross, got_cross)
            + _differences(suites, got_suites)
        )
    )


def assert_grade_change_chains(
    settings: Settings, lines: list[bytes]
) -> dict[str, list[dict[str, Any]]]:
    """Grade changes depend on arrival order, so they are checked by invariants: a redelivered
    change repeats byte-identical, and per tier the distinct changes form an unbroken chain that
    ends at the final grade (a lost or altered change would break it)."""
    final = {k.decode(): agg["grade"] for k, agg in expected_outputs(settings, lines)[0].items()}
    chains: dict[str, list[dict[str, Any]]] = {}
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records(settings, settings.topics.grade_changes):
        change = json.loads(record.value)
        identity = (record.key.decode(), change["run_id"])
        if identity in seen:
            assert seen[identity] == change, "a redelivered grade change differs"
            continue
        seen[identity] = change
        chains.setdefault(record.key.decode(), []).append(change)
    assert chains, "no grade change at all"
    for key, chain in chains.items():
        for before, after in itertools.pairwise(chain):
            assert before["grade"] == after["previous_grade"], (key, before, after)
        assert chain[-1]["grade"] == final[key], key
    return chains
