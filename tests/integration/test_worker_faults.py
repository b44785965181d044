"""Crashes and scale-out: a SIGKILLed worker, two workers in one group."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stream_app.brokers.tansu import EmbeddedBroker
from stream_app.synthetic import Drop, synthetic_lines
from tests.helpers import SAMPLE_FILE, encode, make_event
from tests.integration.harness import (
    Broker,
    Worker,
    assert_grade_change_chains,
    expected_outputs,
    outputs_equal_replay,
    produce_lines,
    settings_for,
    wait_out_dead_member,
    wait_until,
)

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()
SPREAD = [
    encode(make_event(run_id=f"spread-{e}-{t}-{i}", experiment_id=f"spread-{e}", tier=f"T{t}"))
    for e in range(8)
    for t in range(3)
    for i in range(2)
]


@pytest.mark.also_tansu
def test_sigkill_before_the_first_commit_then_restart_converges_to_replay(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """Killed before it ever committed (Faust commits every 2.8 s): the replacement starts from
    no committed offsets with all runs already in the topic. Its consumer fetches stream records
    while it recovers the tables; none of them may be skipped (`faust_transport.ConsumerThread`).
    Later kills, after commits, are `test_chaos`'s."""
    settings = settings_for(broker)
    lines = list(
        synthetic_lines(
            3000,
            experiments=3,
            seed=11,
            start=datetime(2026, 3, 1, tzinfo=UTC),
            drop=Drop(experiment="synthetic-01", tier="T5", after=0.5),
        )
    )
    first = Worker(broker, tmp_path, "first").start()
    workers.append(first)
    first.wait_ready()
    producer = threading.Thread(target=produce_lines, args=(settings, lines), kwargs={"rate": 600})
    producer.start()
    try:
        wait_until(
            lambda: first.metrics().get(("evalstream_runs_received_total", ()), 0) >= 100,
            timeout=60,
            what="the first worker to be mid-stream",
        )
        first.kill()  # SIGKILL: no flush, no commit, no goodbye
        wait_out_dead_member(broker, settings)
        assert first.process is not None
        assert first.process.returncode == -9
        second = Worker(broker, tmp_path, "second").start()
        workers.append(second)
        second.wait_ready()
    finally:
        producer.join(60)
    wait_until(
        lambda: outputs_equal_replay(settings, lines),
        timeout=90,
        what="outputs equal to replay after the crash",
    )
    chains = assert_grade_change_chains(settings, lines)
    drop = chains["synthetic-01/T5"]
    assert any(c["direction"] == "drop" and c["grade"] in ("D", "F") for c in drop), drop
    # Each worker told its broker (Tansu's workarounds on only there) by itself.
    kind = "tansu" if isinstance(broker, EmbeddedBroker) else "kafka"
    assert f"broker: {kind} (cluster id" in second.log_path.read_text()


def test_two_workers_split_partitions_without_duplicate_gauges(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    settings = settings_for(broker)
    a = Worker(broker, tmp_path, "a").start()
    workers.append(a)
    a.wait_ready()
    # The sample's three experiments share a partition: more experiments, so both workers own some.
    lines = SAMPLE + SPREAD
    produce_lines(settings, lines[:130])
    wait_until(lambda: outputs_equal_replay(settings, lines[:130]), 60, what="first half")
    b = Worker(broker, tmp_path, "b").start()
    workers.append(b)
    wait_until(lambda: a.ready() and b.ready(), 90, what="both workers ready after the rebalance")
    produce_lines(settings, lines[130:])
    wait_until(lambda: outputs_equal_replay(settings, lines), 90, what="all events")

    aggs, cross = expected_outputs(settings, lines)
    all_tiers = {(agg["experiment_id"], agg["tier"]) for agg in aggs.values()}

    def owned(worker: Worker, name: str, *labels: str) -> set[tuple[str, ...]]:
        return {
            tuple(dict(lbl)[k] for k in labels)
            for metric, lbl in worker.metrics()
            if metric == name
        }

    def split_cleanly() -> bool:
        tiers_a = owned(a, "evalstream_tier_grade_points", "experiment", "tier")
        tiers_b = owned(b, "evalstream_tier_grade_points", "experiment", "tier")
        exps_a = owned(a, "evalstream_experiment_cost_delta_usd", "experiment")
        exps_b = owned(b, "evalstream_experiment_cost_delta_usd", "experiment")
        return (
            not tiers_a & tiers_b
            and tiers_a | tiers_b == all_tiers
            and bool(tiers_a)
            and bool(tiers_b)
            and not exps_a & exps_b
            and exps_a | exps_b == {(e.decode(),) for e in cross}
        )

    wait_until(split_cleanly, 60, what="each tier's gauges on exactly one worker")
