"""Real inspect_ai evals feeding Apache Kafka and a worker, with the hook and through `watch`:
the worker's outputs equal `replay` of the logs the same evals wrote, on asyncio and on trio; an
eval with the broker out of reach spools its runs, quickly, and `stream-app produce` of the spool
completes the history; `watch` follows a log directory being written, and a Harbor jobs directory,
once across restarts (docs/operations.md, 'From inspect_ai')."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from stream_app.ports import free_port
from stream_app.sources.directories import directory_events
from tests.helpers import REPO, require_module
from tests.integration.harness import (
    Broker,
    Worker,
    outputs_equal_replay,
    settings_for,
    wait_until,
)
from tests.sources.test_harbor_jobs import MAPPING, TIERS, trial, write_job

RUNS_PER_EVAL = 36
"""tests/inspect_evals.py: two tiers, two tasks of 4 and 5 samples, two epochs."""


def run_evals(log_dir: Path, broker_url: str, **env: str) -> tuple[float, str]:
    """tests/inspect_evals.py with the hook on; its seconds and its output."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tests.inspect_evals", str(log_dir)],
        cwd=REPO,
        env={**os.environ, "EVALSTREAM_BROKER_URL": broker_url, **env},
        capture_output=True,
        timeout=180,
        check=False,
    )
    output = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode == 0, output
    return time.monotonic() - began, output


def test_the_hook_publishes_what_replay_of_the_logs_says_and_spools_when_it_cannot(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    require_module("inspect_ai", "inspect")
    settings = settings_for(broker)
    worker = Worker(broker, tmp_path, "w").start()
    workers.append(worker)
    worker.wait_ready()

    live = tmp_path / "live-logs"
    run_evals(live, broker.url)
    lines, skipped = directory_events([live])
    assert len(lines) == RUNS_PER_EVAL
    assert skipped == []
    wait_until(lambda: outputs_equal_replay(settings, lines), 90, what="the hook's runs")

    on_trio = tmp_path / "trio-logs"
    run_evals(on_trio, broker.url, INSPECT_ASYNC_BACKEND="trio")
    lines, _ = directory_events([live, on_trio])
    wait_until(lambda: outputs_equal_replay(settings, lines), 90, what="the runs of trio's eval")

    spool = tmp_path / "spool.jsonl"
    offline = tmp_path / "offline-logs"
    closed = f"127.0.0.1:{free_port()}"
    seconds, output = run_evals(offline, closed, EVALSTREAM_SPOOL=str(spool))
    assert len(spool.read_bytes().splitlines()) == RUNS_PER_EVAL
    assert f"{RUNS_PER_EVAL // 2} spooled to {spool}" in " ".join(output.split())
    assert seconds < 60  # the eval did not wait on the broker
    produced = subprocess.run(
        [sys.executable, "-m", "stream_app", "produce", str(spool)],
        cwd=REPO,
        env={**os.environ, "EVALSTREAM_BROKER_URL": broker.url},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr
    every, _ = directory_events([live, on_trio, offline])
    wait_until(lambda: outputs_equal_replay(settings, every), 90, what="the spooled runs")
    worker.assert_alive()


def test_watch_publishes_logs_and_trials_as_they_are_written_and_once_across_restarts(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """`stream-app watch` of an inspect_ai log directory (an eval writing into it while it
    watches) and a Harbor jobs directory: the worker ends where `replay` of both says, and a
    restart of the watcher sends nothing again."""
    require_module("inspect_ai", "inspect")
    settings = settings_for(broker)
    worker = Worker(broker, tmp_path, "w").start()
    workers.append(worker)
    worker.wait_ready()
    logs, jobs, state = tmp_path / "logs", tmp_path / "jobs", tmp_path / "watch-state.jsonl"
    logs.mkdir()
    jobs.mkdir()
    env = {**os.environ, "EVALSTREAM_BROKER_URL": broker.url, "EVALSTREAM_TIERS": json.dumps(TIERS)}
    command = [
        sys.executable,
        "-m",
        "stream_app",
        "watch",
        str(logs),
        str(jobs),
        "--state",
        str(state),
    ]
    with (tmp_path / "watch.log").open("wb") as sink:
        watching = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        without_hook = {k: v for k, v in os.environ.items() if k != "EVALSTREAM_BROKER_URL"}
        subprocess.run(
            [sys.executable, "-m", "tests.inspect_evals", str(logs)],
            cwd=REPO,
            env=without_hook,
            capture_output=True,
            timeout=180,
            check=True,
        )
        write_job(jobs, [trial(f"hello-world__{n}", reward=float(n % 2)) for n in range(4)])
        lines, skipped = directory_events([logs, jobs], MAPPING)
        assert len(lines) == RUNS_PER_EVAL + 4
        assert skipped == []
        wait_until(lambda: outputs_equal_replay(settings, lines), 90, what="the watched runs")
    finally:
        watching.send_signal(signal.SIGINT)
        watching.wait(30)
    again = subprocess.run(
        [*command, "--once"], cwd=REPO, env=env, capture_output=True, timeout=120, check=False
    )
    assert again.returncode == 0, again.stderr
    assert f"{len(lines)} published ({len(lines)} before this start)" in again.stderr.decode()
