"""Chaos: workers SIGKILLed mid-stream, a worker lost from a group of two, the broker connection
cut until the broker drops the worker from its group. Through all of it the final outputs equal
`replay`, no run is lost, and grade changes are not duplicated in effect."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest

from stream_app.synthetic import Drop, synthetic_lines
from tests.integration.harness import (
    Broker,
    Worker,
    assert_grade_change_chains,
    expected_outputs,
    make_broker,
    outputs_equal_replay,
    produce_lines,
    settings_for,
    wait_until,
    wait_until_group_empty,
)
from tests.integration.tcp_proxy import TcpProxy

pytestmark = pytest.mark.chaos


def synthetic(count: int, seed: int) -> list[bytes]:
    return list(
        synthetic_lines(
            count,
            experiments=3,
            seed=seed,
            start=datetime(2026, 4, 1, tzinfo=UTC),
            drop=Drop(experiment="synthetic-01", tier="T5", after=0.5),
        )
    )


def received(worker: Worker) -> float:
    return (
        worker.metrics().get(("evalstream_runs_received_total", ()), 0.0) if worker.ready() else 0.0
    )


def test_three_sigkills_while_20k_events_stream_in(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    settings = settings_for(broker)
    lines = synthetic(20_000, seed=3)
    rnd = random.Random(20_000)
    worker = Worker(broker, tmp_path, "w0").start()
    workers.append(worker)
    worker.wait_ready()
    producer = threading.Thread(target=produce_lines, args=(settings, lines), kwargs={"rate": 1500})
    producer.start()
    kills = []
    try:
        for round_ in range(1, 4):
            # A random point in this worker's life: after it has handled some events.
            threshold = rnd.randint(300, 2500)
            wait_until(
                cast(Callable[[], bool], lambda w=worker, t=threshold: received(w) >= t),
                120,
                what=f"worker {round_ - 1} mid-stream",
            )
            kills.append(received(worker))
            worker.kill()
            worker = Worker(broker, tmp_path, f"w{round_}").start()
            workers.append(worker)
            worker.wait_ready()
    finally:
        producer.join(120)
    assert len(kills) == 3
    wait_until(
        lambda: outputs_equal_replay(settings, lines),
        180,
        interval=2,
        what="outputs equal to replay",
    )
    chains = assert_grade_change_chains(settings, lines)
    assert any(c["direction"] == "drop" for c in chains["synthetic-01/T5"])


def test_survivor_takes_all_partitions_and_recovers_the_tables(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    settings = settings_for(broker)
    lines = synthetic(4000, seed=4)
    a = Worker(broker, tmp_path, "a").start()
    b = Worker(broker, tmp_path, "b").start()
    workers += [a, b]
    wait_until(lambda: a.ready() and b.ready(), 90, what="both workers ready")
    produce_lines(settings, lines[:2000])
    wait_until(
        lambda: outputs_equal_replay(settings, lines[:2000]), 90, what="first half, two workers"
    )
    owned_by_b = [name for name, _ in b.metrics() if name == "evalstream_tier_grade_points"]
    assert owned_by_b, "b owned no tier before it died"
    b.kill()
    produce_lines(settings, lines[2000:])
    wait_until(  # the suite hop is paced: on a loaded machine it takes minutes to catch up
        lambda: outputs_equal_replay(settings, lines),
        240,
        interval=2,
        what="all events, survivor alone",
    )
    # The survivor now exports every tier: it recovered b's windows from the changelog.
    aggs, _ = expected_outputs(settings, lines)
    wait_until(
        lambda: (
            len([1 for name, _ in a.metrics() if name == "evalstream_tier_grade_points"])
            == len(aggs)
        ),
        60,
        what="every tier's gauges on the survivor",
    )
    assert_grade_change_chains(settings, lines)


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[Broker, TcpProxy]]:
    broker = make_broker(tmp_path / "broker.log")
    proxy = TcpProxy(broker.port)
    broker.advertised_port = proxy.port
    proxy.start()
    broker.start()
    try:
        yield broker, proxy
    finally:
        proxy.stop()
        broker.stop()


def test_broker_connection_cut_until_the_group_drops_the_worker(
    proxied: tuple[Broker, TcpProxy], workers: list[Worker], tmp_path: Path
) -> None:
    """The cut lasts until the worker has found its group coordinator gone and the broker has
    dropped it from the group for want of heartbeats (`session_timeout_s`): back, it must
    reconnect and rejoin by itself, and lose nothing."""
    broker, proxy = proxied
    settings = settings_for(broker)
    lines = synthetic(3000, seed=5)
    worker = Worker(broker, tmp_path, "cut").start()
    workers.append(worker)
    worker.wait_ready()
    produce_lines(settings, lines[:1500])
    wait_until(lambda: outputs_equal_replay(settings, lines[:1500]), 90, what="before the cut")
    connections_before = proxy.connections
    cut_at = worker.log_path.stat().st_size

    def since_cut() -> str:
        return worker.log_path.read_bytes()[cut_at:].decode(errors="replace")

    proxy.cut()
    wait_until(
        lambda: "Marking the coordinator dead" in since_cut(),
        settings.session_timeout_s + 10,
        what="the worker to find its group coordinator unreachable",
    )
    # The broker is asked at its own port: the worker's way to it is cut.
    wait_until_group_empty(broker, settings, "the broker to drop the cut-off worker", slack=10)
    worker.assert_alive()
    proxy.restore()
    produce_lines(settings, lines[1500:])
    wait_until(lambda: outputs_equal_replay(settings, lines), 120, interval=2, what="after the cut")
    assert proxy.connections > connections_before  # it reconnected by itself
    assert "Joined group" in since_cut()  # and rejoined its group
    worker.assert_alive()
    assert_grade_change_chains(settings, lines)
