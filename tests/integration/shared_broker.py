"""One Apache Kafka broker for every pytest-xdist worker of a run. Each worker used to start its
own and keep it to the end: three JVMs, each idling at a few percent of a core, on a machine of
two cores the whole suite needs. The first worker to ask starts it; its users (PID and start
time, so that a reused PID is not one) are listed in a file of the run's shared directory, under
a lock; the last one out stops it, by PID when another worker started it. A worker that died
without leaving (a crash, xdist's kill at Ctrl-C) is dropped from the list by the next one to
look, and the xdist controller stops whatever broker is left when the run ends.

Registered as a plugin (tests/conftest.py): its hooks run in the controller."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stream_app.brokers.kafka import ApacheKafka, kafka_home, keep_archive
from stream_app.processes.orphans import running, start_time

SHARED_DIR = "EVALSTREAM_TEST_SHARED_DIR"
"""The run's shared directory, made by the xdist controller and inherited by its workers."""
STOP_S = 30.0  # SIGTERM, then SIGKILL: as `ApacheKafka.stop` gives its own process


class SharedKafka(ApacheKafka):
    """A broker that this process or another one started: known by its port and process."""

    process_id: tuple[int, str] = (0, "")

    def alive(self) -> bool:
        return alive(*self.process_id)


def alive(pid: int, started: str) -> bool:
    """Whether the process `pid` that started at `started` runs: a zombie (exited, not yet
    reaped by whoever adopted it) does not, nor another process that got its PID since."""
    return running(pid) and start_time(pid) == started


def me() -> list[Any]:
    pid = os.getpid()
    return [pid, start_time(pid)]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def stop_pid(pid: int, started: str) -> bool:
    """Stop a broker another process started (its own process group): it is no child of this
    process, so its exit is polled for rather than waited on. Whether SIGTERM was enough (the
    JVM then wrote its class archive whole)."""
    for signum, within in ((signal.SIGTERM, STOP_S), (signal.SIGKILL, 10.0)):
        if not alive(pid, started):
            return signum == signal.SIGTERM
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)
        deadline = time.monotonic() + within
        while alive(pid, started) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not alive(pid, started):
            return signum == signal.SIGTERM
    return False


def stop_recorded(info: dict[str, Any]) -> None:
    """Stop the broker `info` records, started by another process, and clean up after it."""
    complete = stop_pid(*info["broker"])
    shutil.rmtree(info["workdir"], ignore_errors=True)
    keep_archive(kafka_home(), info["owner"], complete)


@contextlib.contextmanager
def shared_kafka(root: Path) -> Iterator[SharedKafka]:
    """The broker of every process that shares `root`: started here when none is up."""
    state, lock = root / "shared-kafka.json", root / "shared-kafka.lock"
    with locked(lock):
        info = json.loads(state.read_text()) if state.exists() else {}
        users = [u for u in info.get("users", []) if alive(*u)]
        if info and alive(*info["broker"]):
            broker = SharedKafka(port=info["port"], log_file=Path(info["log"]))
        elif users:
            raise RuntimeError(f"the shared broker died while others used it: {info['log']}")
        else:
            broker = SharedKafka(log_file=root / "shared-kafka.log").start()
            assert broker.process is not None
            pid = broker.process.pid
            info = {"port": broker.port, "broker": [pid, start_time(pid)], "owner": os.getpid(),
                    "log": str(broker.log_file), "workdir": str(broker.workdir)}  # fmt: skip
        broker.process_id = (info["broker"][0], info["broker"][1])
        info["users"] = [*users, me()]
        state.write_text(json.dumps(info))
    try:
        yield broker
    finally:
        with locked(lock):
            info = json.loads(state.read_text())
            info["users"] = [u for u in info["users"] if alive(*u) and u != me()]
            if info["users"]:
                state.write_text(json.dumps(info))
            else:
                state.unlink()
                if broker.process is not None:
                    broker.stop()  # started here: stopped, reaped, its directory removed
                else:
                    stop_recorded(info)


def xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands tests out to pytest-xdist workers."""
    workers = getattr(config.option, "numprocesses", None)
    return not hasattr(config, "workerinput") and isinstance(workers, int) and workers > 0


def pytest_configure(config: pytest.Config) -> None:
    """In the controller: the run's shared directory, which its workers inherit."""
    if xdist_controller(config):
        os.environ[SHARED_DIR] = tempfile.mkdtemp(prefix="evalstream-tests-")


def pytest_unconfigure(config: pytest.Config) -> None:
    """In the controller, once every worker is gone: a broker no worker stopped (one died
    without leaving) is stopped, and the shared directory goes."""
    root = os.environ.get(SHARED_DIR)
    if not xdist_controller(config) or root is None:
        return
    state = Path(root) / "shared-kafka.json"
    if state.exists():
        stop_recorded(json.loads(state.read_text()))
    shutil.rmtree(root, ignore_errors=True)
