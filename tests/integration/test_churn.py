"""Months of operation in a minute: 10,000 experiments come and go through one live worker with a
shortened `experiment_idle_ttl_s`. After each wave retires, the worker holds nothing of it, counted
exactly (a retired key left behind in a table, a cache or a gauge fails the test, whatever the
machine's load); every retired key's latest record is a tombstone (changelogs and outputs)."""

from __future__ import annotations

from pathlib import Path

from stream_app.processes.worker_process import Samples, metric_total
from stream_app.service.stages.cross_tier import CrossTierStage
from stream_app.service.stages.suites import SuitesStage, parse_table_key
from stream_app.service.stages.windows import WindowsStage
from stream_app.service.topology import changelog_topic
from tests.helpers import encode, make_event
from tests.integration.harness import (
    Broker,
    Mismatch,
    Worker,
    last_by_key,
    produce_lines,
    records,
    settings_for,
    wait_until,
)

WAVES = 4
PER_WAVE = 2_500
TTL_S = 3
TABLES = (WindowsStage, CrossTierStage, SuitesStage)


def tier_series(samples: Samples) -> int:
    return sum(1 for (name, labels) in samples if dict(labels).get("experiment") is not None)


def suite_series(samples: Samples) -> int:
    """The suite tiers' series: withdrawn once their last experiment retires, by the suite hop,
    whose batches are paced (`suite_interval_s`) and so come up to that much after the windows'."""
    return sum(1 for (name, labels) in samples if dict(labels).get("suite") is not None)


def held(samples: Samples) -> dict[str, float]:
    """Everything the worker keeps per experiment, counted: each table's keys and its stage's
    cached states, the experiments tracked for retirement, and the experiments' and suites'
    series (gauges, and grade-change counters)."""
    counts: dict[str, float] = {}
    for stage in TABLES:
        table = (("table", stage.table_name),)
        for name in ("evalstream_table_keys", "evalstream_table_cached_keys"):
            assert (name, table) in samples, f"{name}{{table={stage.table_name}}} not exported"
            counts[f"{name}[{stage.table_name}]"] = samples[(name, table)]
    counts["evalstream_experiments"] = metric_total(samples, "evalstream_experiments")
    counts["experiment series"] = tier_series(samples)
    counts["suite series"] = suite_series(samples)
    return counts


def wave(n: int) -> list[bytes]:
    return [
        encode(make_event(run_id=f"w{n}-{i}", experiment_id=f"churn-{n}-{i:05d}", tier="T1"))
        for i in range(PER_WAVE)
    ]


def test_ten_thousand_experiments_retire_and_leave_nothing_behind(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    worker = Worker(
        broker,
        tmp_path,
        "churn",
        EVALSTREAM_EXPERIMENT_IDLE_TTL_S=str(TTL_S),
        EVALSTREAM_RETIRE_CHECK_S="0.5",
        # Tables in memory: `evalstream_table_keys` counts their keys exactly there (on disk it
        # is RocksDB's estimate, which counts deletions until compaction). What is on disk is
        # checked by the changelogs' tombstones below and by test_persistent_store.
        EVALSTREAM_STORE="memory",
        # Suite batches well within TTL_S: each experiment's share is written before it retires,
        # so that every retirement leaves a tombstone to count below (a share made and retired
        # in one batch is never written).
        EVALSTREAM_SUITE_INTERVAL_S="1",
    ).start()
    workers.append(worker)
    worker.wait_ready()
    settings = settings_for(broker)
    peaks, windows_held, after = [], [], []
    for n in range(WAVES):
        produce_lines(settings, wave(n))
        accepted = (n + 1) * PER_WAVE

        def all_in(target: int = accepted) -> Samples | None:
            samples = worker.metrics(timeout=30)
            return (
                samples
                if metric_total(samples, "evalstream_runs_accepted_total") >= target
                else None
            )

        # Polled each second: a scrape of a wave's series costs the worker under test its time.
        samples = wait_until(all_in, 120, interval=1, what=f"wave {n} accepted")
        peaks.append(tier_series(samples))
        windows_held.append(held(samples)[f"evalstream_table_keys[{WindowsStage.table_name}]"])

        def retired(target: int = accepted) -> Samples | Mismatch:
            samples = worker.metrics(timeout=30)
            left = {name: count for name, count in held(samples).items() if count}
            done = metric_total(samples, "evalstream_experiments_retired_total") >= target
            return samples if done and not left else Mismatch(f"retired: {done}, left: {left}")

        # Exact: every count is 0 once the wave has retired (a leak never gets there).
        emptied = wait_until(retired, 120, interval=1, what=f"wave {n} retired")
        assert isinstance(emptied, dict)
        after.append(len(emptied))
    print(f"\nchurn: tier series at each wave's peak {peaks}, all series after it {after}")
    print(f"churn: tier windows held when each wave was in {windows_held}")
    assert max(windows_held) > 0  # the gauge counts what the table holds
    assert max(after) - min(after) <= 5, after  # and nothing else accumulates either

    topics = settings.topics
    total = WAVES * PER_WAVE
    suites_changelog = changelog_topic(settings, SuitesStage)
    for topic in (
        topics.aggregates,
        topics.cross_tier,
        topics.suite_tiers,
        *(changelog_topic(settings, stage) for stage in TABLES),
    ):
        written = records(settings, topic)
        assert last_by_key(written) == {}, topic  # every key's latest record is a tombstone
        if topic == topics.suite_tiers:  # suite tiers: one key per tier, not per experiment
            continue
        gone = {r.key for r in written if r.value is None}
        marks = {key for key in gone if key is not None and parse_table_key(key).mark}
        assert len(gone - marks) == total, topic  # on the suite table: a share per experiment
        # and, beside them, the mark of each suite tier the retirements emptied
        assert bool(marks) == (topic == suites_changelog), topic
    worker.assert_alive()
