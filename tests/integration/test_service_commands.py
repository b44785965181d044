"""`stream-app demo`, `worker` and `broker` run as a user runs them, as real subprocesses."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from stream_app.ports import free_port, port_open
from tests.helpers import kill_with_descendants
from tests.integration.harness import Worker, make_broker, require_tansu, wait_until


def stream_app(*args: str, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "stream_app", *args],
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_demo_runs_live_and_ctrl_c_leaves_nothing_behind(tmp_path: Path) -> None:
    require_tansu()
    out = tmp_path / "demo.out"
    with out.open("wb") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "stream_app", "demo", "--rate", "300"],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # The table trails the processed count by a stage: wait for a table showing all of it.
        text = wait_until(
            lambda: (
                (t := out.read_text(errors="replace"))
                and "processed 1,080/1,080" in t
                and "test-003       T6       3" in t.rsplit("processed", 1)[-1]
                and t
            ),
            timeout=120,
            what="the demo's table to show every processed run",
        )
        demo.send_signal(signal.SIGINT)
        assert demo.wait(60) == 0
    finally:
        kill_with_descendants(demo)
    text = out.read_text(errors="replace")
    broker = re.search(r"embedded broker 127\.0\.0\.1:(\d+)", text)
    metrics = re.search(r"metrics (http://127\.0\.0\.1:(\d+)/metrics)", text)
    assert broker, text[:2000]
    assert metrics, text[:2000]
    assert "final state:" in text
    final = text.split("final state:")[1]
    rows = [line for line in final.splitlines() if re.match(r"test-00\d\s+T\d", line)]
    assert len(rows) == 21, final
    assert "test-001       T0      72 A" in final  # all 72 runs of the tier
    # Everything it started is gone: the broker's and the worker's ports are closed.
    assert not port_open("127.0.0.1", int(broker.group(1)))
    assert not port_open("127.0.0.1", int(metrics.group(2)))


def test_worker_reports_a_taken_port_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = stream_app(
            "worker", EVALSTREAM_WEB_PORT=str(port), EVALSTREAM_BROKER_URL="127.0.0.1:1"
        )
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert f"web port 127.0.0.1:{port} is already in use" in output.decode()
    assert b"Traceback" not in output


def test_worker_started_before_the_broker_waits_then_works(
    tmp_path: Path, workers: list[Worker]
) -> None:
    port = free_port()
    broker = make_broker(tmp_path / "broker.log", port=port)
    worker = Worker(broker, tmp_path, "early").start()
    workers.append(worker)
    try:
        wait_until(lambda: "unreachable" in worker.log(), timeout=30, what="a retry log line")
        line = next(x for x in worker.log().splitlines() if "unreachable" in x)
        assert f"broker 127.0.0.1:{port} unreachable" in line
        assert "retrying in" in line
        # It keeps retrying while the broker stays away: a second attempt fails too.
        wait_until(
            lambda: worker.log().count("unreachable") >= 2, timeout=30, what="a second retry line"
        )
        broker.start()
        worker.wait_ready(timeout=90)
        assert "Traceback" not in worker.log()
    finally:
        worker.stop()
        broker.stop()


def test_broker_command_prints_its_address_and_stops_on_ctrl_c() -> None:
    require_tansu()
    port = free_port()
    proc = stream_app("broker", "--port", str(port))
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()
        assert f"listening on 127.0.0.1:{port}" in first
        assert port_open("127.0.0.1", port)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        assert not port_open("127.0.0.1", port)
    finally:
        kill_with_descendants(proc)
