"""A worker waiting for its broker already answers `/healthz` (alive) and `/readyz` (503), so a
health check does not mark it unhealthy while Kafka starts; it still stops cleanly on a signal and
goes on to the real worker once the broker is there."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from stream_app.ports import free_port, port_open
from stream_app.processes.worker_process import WorkerProcess
from tests.integration.harness import Worker, make_broker, wait_until


def waiting_worker(tmp_path: Path, broker_port: int) -> WorkerProcess:
    """A worker whose `--broker` names a loopback port nothing listens on; the environment names
    another, so its log says which one it used."""
    command = [sys.executable, "-m", "stream_app", "worker", "--broker", f"127.0.0.1:{broker_port}"]
    return WorkerProcess(
        tmp_path, "waiting", broker_url="127.0.0.1:1", partitions=4, command=command
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_healthz_while_the_broker_is_unreachable(tmp_path: Path, signum: int) -> None:
    broker_port = free_port()
    assert not port_open("127.0.0.1", broker_port)
    worker = waiting_worker(tmp_path, broker_port).start()
    try:
        started = time.monotonic()
        _, body = wait_until(
            lambda: (answer := worker.get("/healthz", timeout=1))[0] == 200 and answer,
            timeout=10,
            interval=0.1,
            what="/healthz to answer 200",
        )
        assert time.monotonic() - started < 10
        assert json.loads(body)["status"] == "alive"
        ready_status, ready_body = worker.get("/readyz")
        assert ready_status == 503
        assert json.loads(ready_body)["ready"] is False
        # Still waiting: the flag's broker, not the environment's, is the one it tries.
        wait_until(
            lambda: "unreachable" in worker.log_path.read_text(), timeout=15, what="a retry line"
        )
        log = worker.log_path.read_text()
        assert f"broker 127.0.0.1:{broker_port} unreachable" in log
        assert "127.0.0.1:1 " not in log
        assert worker.get("/healthz")[0] == 200
        assert worker.process is not None
        worker.process.send_signal(signum)
        assert worker.process.wait(10) == 0
        assert not port_open("127.0.0.1", worker.port)
        assert "Traceback" not in worker.log_path.read_text()
    finally:
        worker.stop()


def test_healthz_carries_on_into_the_running_worker(tmp_path: Path, workers: list[Worker]) -> None:
    """From waiting to running, `/healthz` answers 200 but for the moment the waiting server hands
    the port to Faust's; `/readyz` goes from 503 to 200."""
    broker = make_broker(tmp_path / "broker.log", port=free_port())
    worker = Worker(broker, tmp_path, "early").start()
    workers.append(worker)
    answers: list[tuple[float, int]] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            answers.append((time.monotonic(), worker.get("/healthz", timeout=1)[0]))
            time.sleep(0.02)

    prober = threading.Thread(target=probe)
    try:
        wait_until(lambda: worker.get("/healthz")[0] == 200, timeout=10, what="/healthz")
        prober.start()
        assert worker.get("/readyz")[0] == 503
        # Answers while it waits for the broker, then answers from the running worker.
        wait_until(lambda: len(answers) >= 20, timeout=10, what="answers while waiting")
        broker.start()
        worker.wait_ready(timeout=90)
        ready_at = time.monotonic()
        wait_until(
            lambda: sum(at > ready_at for at, _ in answers) >= 20,
            timeout=10,
            what="answers after ready",
        )
    finally:
        done.set()
        if prober.is_alive():
            prober.join()
        worker.stop()
        broker.stop()
    statuses = [status for _, status in answers]
    assert statuses[0] == 200
    assert statuses[-1] == 200
    assert set(statuses) <= {0, 200}, statuses
    # The hand-over leaves the port closed for a moment only (no listener, no answer: 0).
    down = [at for at, status in answers if status != 200]
    print(f"/healthz probes: {len(answers)}, unanswered: {len(down)}")
    # Under 3 s, well within a liveness probe's failure threshold (3 misses, 10 s apart by
    # default): 1 s held on an idle machine, not beside the rest of the suite (1.05 s seen).
    assert not down or down[-1] - down[0] < 3.0, f"/healthz down for {down[-1] - down[0]:.2f} s"
