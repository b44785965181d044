"""Months of operation in a minute: 20,000 experiments come and go through one live worker with a
shortened `experiment_idle_ttl_s`. Series and worker memory stay bounded, every retired key gets
its tombstones (changelogs and output topics), and its gauges go."""

from __future__ import annotations

from pathlib import Path

from stream_app.processes.worker_process import Samples, metric_total
from tests.helpers import encode, make_event
from tests.integration.harness import (
    Broker,
    Worker,
    produce_lines,
    records,
    settings_for,
    wait_until,
)

WAVES = 4
PER_WAVE = 5_000
TTL_S = 3


def rss_mib(worker: Worker) -> float:
    assert worker.process is not None
    status = Path(f"/proc/{worker.process.pid}/status").read_text()
    kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return kib / 1024


def tier_series(samples: Samples) -> int:
    return sum(1 for (name, labels) in samples if dict(labels).get("experiment") is not None)


def suite_series(samples: Samples) -> int:
    """The suite tiers' series: withdrawn once their last experiment retires, by the suite hop,
    whose batches are paced (`suite_interval_s`) and so come a little after the windows'."""
    return sum(1 for (name, labels) in samples if dict(labels).get("suite") is not None)


def wave(n: int) -> list[bytes]:
    return [
        encode(make_event(run_id=f"w{n}-{i}", experiment_id=f"churn-{n}-{i:05d}", tier="T1"))
        for i in range(PER_WAVE)
    ]


def test_twenty_thousand_experiments_retire_and_leave_nothing_behind(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    worker = Worker(
        broker,
        tmp_path,
        "churn",
        EVALSTREAM_EXPERIMENT_IDLE_TTL_S=str(TTL_S),
        EVALSTREAM_RETIRE_CHECK_S="0.5",
    ).start()
    workers.append(worker)
    worker.wait_ready()
    settings = settings_for(broker)
    peaks, after, rss = [], [], []
    for n in range(WAVES):
        produce_lines(settings, wave(n))
        accepted = (n + 1) * PER_WAVE

        def all_in(target: int = accepted) -> Samples | None:
            samples = worker.metrics(timeout=30)
            return (
                samples
                if metric_total(samples, "evalstream_runs_received_total") >= target
                else None
            )

        peaks.append(tier_series(wait_until(all_in, 120, what=f"wave {n} received")))

        def retired(target: int = accepted) -> Samples | None:
            samples = worker.metrics(timeout=30)
            done = metric_total(samples, "evalstream_experiments_retired_total") >= target
            gone = tier_series(samples) == 0 and suite_series(samples) == 0
            return samples if done and gone else None

        samples = wait_until(retired, 120, interval=0.5, what=f"wave {n} retired")
        after.append(len(samples))
        rss.append(rss_mib(worker))
        assert metric_total(samples, "evalstream_experiments") == 0
    print(f"\nchurn: tier series at each wave's peak {peaks}, all series after it {after}")
    print(f"churn: worker RSS after each wave (MiB) {[round(r) for r in rss]}")
    # Nothing accumulates: every wave ends where the first did, in series and (within noise)
    # in memory; 20,000 live experiments would hold ~300,000 series and far more memory.
    assert max(after) - min(after) <= 5, after
    assert rss[-1] - rss[0] < 60, rss

    topics = settings.topics
    windows_log = f"{settings.app_id}-tier-windows-changelog"
    experiments_log = f"{settings.app_id}-experiment-tiers-changelog"
    total = WAVES * PER_WAVE
    for topic in (topics.aggregates, topics.cross_tier, windows_log, experiments_log):
        tombstones = {r.key for r in records(settings, topic) if r.value is None}
        assert len(tombstones) == total, topic
    worker.assert_alive()
