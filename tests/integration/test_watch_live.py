"""`stream-app watch` as a user runs it, a real subprocess against the test broker and a real
worker: runs already there and runs finishing while it watches are published (within a second
or two), a malformed run is reported once and skipped, a restart sends nothing twice, and the
worker ends where `stream-app replay DIR` says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stream_app.service.settings import Settings
from tests.helpers import SAMPLE_FILE
from tests.integration.harness import Broker, Worker, latest, records, settings_for, wait_until
from tests.scylla_dirs import Run, make_experiment, write_event_as_run, write_json, write_run

SAMPLE = [json.loads(line) for line in SAMPLE_FILE.read_bytes().splitlines()]


def stream_app(*args: str, broker: Broker, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "stream_app", *args],
            env={**os.environ, "EVALSTREAM_BROKER_URL": broker.url, "EVALSTREAM_PARTITIONS": "4"},
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            return process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    return process.returncode


def published(settings: Settings) -> dict[str, Any]:
    """run_id -> the input record that carried it."""
    return {json.loads(r.value)["run_id"]: r for r in records(settings, settings.topics.input)}


def replay_dir(results: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "stream_app", "replay", str(results)],
        capture_output=True,
        timeout=60,
        check=True,
    )
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def worker_equals_replay(settings: Settings, expected: dict[str, Any]) -> bool:
    aggs = {f"{a['experiment_id']}/{a['tier']}".encode(): a for a in expected["tiers"]}
    cross = {c["experiment_id"].encode(): c for c in expected["cross_tier"]}
    return (
        latest(settings, settings.topics.aggregates) == aggs
        and latest(settings, settings.topics.cross_tier) == cross
    )


@pytest.mark.also_tansu
def test_watch_publishes_live_once_and_the_worker_equals_replay_dir(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    settings = settings_for(broker)
    results = tmp_path / "results"
    for event in SAMPLE[:200]:  # a finished part of three experiments
        write_event_as_run(results, event)
    experiment = results / "2026-01-05T09-00-00-test-001"
    bad = write_run(
        experiment, Run(tier="T9", number=1), result={**Run().result(), "judge_score": 1.7}
    )
    unfinished = write_run(experiment, Run(tier="T9", number=2), finished=False)
    worker = Worker(broker, tmp_path, "worker")
    workers.append(worker)
    worker.start()
    worker.wait_ready()
    state = tmp_path / "watch-state.jsonl"
    log = tmp_path / "watch.log"
    watch = stream_app("watch", str(results), "--state", str(state), broker=broker, log=log)
    try:
        wait_until(lambda: len(published(settings)) == 200, 60, what="the 200 finished runs")
        # A run finishing while it watches is on the topic within a second or two: the record's
        # broker timestamp against the moment its run_result.json was written.
        directory = write_event_as_run(results, SAMPLE[200])
        written = (directory / "run_result.json").stat().st_mtime
        record = wait_until(
            lambda: published(settings).get(SAMPLE[200]["run_id"]), 20, what="the new run"
        )
        latency = record.timestamp / 1000 - written
        print(f"run written -> published: {latency:.2f} s")
        assert latency < 2.0
        # The rest of the sample lands while it watches; the unfinished run finishes too.
        for event in SAMPLE[201:]:
            write_event_as_run(results, event)
        write_json(unfinished / "run_result.json", Run(tier="T9", number=2).result())
        wait_until(lambda: len(published(settings)) == len(SAMPLE) + 1, 60, what="every run")
    finally:
        assert stop(watch) == 0, log.read_text()
    text = log.read_text()
    assert text.count(f"skipped {bad}: out_of_range: run_result.json: judge_score 1.7") == 1, text
    assert f"{len(SAMPLE) + 2} runs found · {len(SAMPLE) + 1} published · 1 skipped" in text, text
    # Every event on the topic is the sample's own, field by field, keyed by experiment.
    on_topic = published(settings)
    for event in SAMPLE:
        record = on_topic[event["run_id"]]
        assert json.loads(record.value) == event
        assert record.key == event["experiment_id"].encode()

    # Restarted (live, then --once): nothing is sent twice, the state file says what was sent.
    count = len(records(settings, settings.topics.input))
    again = stream_app("watch", str(results), "--state", str(state), broker=broker, log=log)
    wait_until(lambda: "(262 before this start)" in log.read_text(), 60, what="the rescan")
    assert stop(again) == 0
    once = subprocess.run(
        [
            sys.executable,
            "-m",
            "stream_app",
            "watch",
            str(results),
            "--once",
            "--state",
            str(state),
        ],
        env={**os.environ, "EVALSTREAM_BROKER_URL": broker.url, "EVALSTREAM_PARTITIONS": "4"},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert once.returncode == 0, once.stderr
    assert b"263 runs found \xc2\xb7 262 published (262 before this start) \xc2\xb7 1 skipped" in (
        once.stderr
    )
    # No wait: both watchers have exited after their last line, and a watcher exits only once
    # the broker has acknowledged whatever it sent (acks=all, then the producer's flush), so
    # anything either sent twice is on the topic already.
    assert len(records(settings, settings.topics.input)) == count

    # The worker holds exactly what `stream-app replay DIR` computes from the directories.
    expected = replay_dir(results)
    assert [s["reason"] for s in expected["skipped_runs"]] == ["out_of_range"]
    assert len(expected["tiers"]) == 22  # the sample's 21 tiers and test-001/T9
    wait_until(
        lambda: worker_equals_replay(settings, expected), 90, what="worker outputs = replay DIR"
    )
    worker.assert_alive()


def test_watch_by_polling_and_a_new_experiment_in_the_results_folder(
    broker: Broker, tmp_path: Path
) -> None:
    """Without file events (`--poll`), and for an experiment that appears after the start."""
    settings = settings_for(broker)
    results = tmp_path / "results"
    results.mkdir()
    log = tmp_path / "watch.log"
    state = tmp_path / "state.jsonl"
    watch = stream_app(
        "watch", str(results), "--poll", "0.3", "--state", str(state), broker=broker, log=log
    )
    try:
        wait_until(lambda: "rescanning every 0.3 s" in log.read_text(), 60, what="the start")
        experiment = make_experiment(results, "late-exp")
        write_run(experiment, Run(number=1))
        run_id = "late-exp/T0/00/run_01"
        wait_until(lambda: run_id in published(settings), 20, what="the polled run")
    finally:
        assert stop(watch) == 0, log.read_text()
    assert state.read_text() == f'"{run_id}"\n'


def test_demo_shows_a_directory_live(tmp_path: Path) -> None:
    """`stream-app demo --watch DIR`: the user's own experiment, graded live while it runs."""
    from tests.integration.harness import require_tansu

    require_tansu()
    results = tmp_path / "results"
    for event in SAMPLE[:30]:
        write_event_as_run(results, event)
    out = tmp_path / "demo.out"
    with out.open("wb") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "stream_app", "demo", "--watch", str(results)],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: "processed 30/30" in out.read_text(), 120, what="the first 30 runs")
        write_event_as_run(results, SAMPLE[30])  # a run finishing while the demo runs
        wait_until(lambda: "processed 31/31" in out.read_text(), 60, what="the new run")
    finally:
        assert stop(demo) == 0
    text = out.read_text()
    assert "runs of " + str(results) + " as they finish" in text
    assert "watching: 31 of 31 runs published" in text
    final = text.split("final state:")[1]
    assert "test-001       T0      14" in final, final  # its runs of the 31
