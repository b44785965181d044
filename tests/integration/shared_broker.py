"""One Apache Kafka broker for every pytest-xdist worker of a run. Each worker used to start its
own and keep it to the end: three JVMs, each idling at a few percent of a core, on a machine of
two cores the whole suite needs. The first worker to ask starts it; each user is counted in a
file beside the workers' temporary directories, under a lock; the last one out stops it, by PID
when another worker started it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from stream_app.brokers.kafka import ApacheKafka

STOP_S = 30.0  # SIGTERM, then SIGKILL: as `ApacheKafka.stop` gives its own process


class SharedKafka(ApacheKafka):
    """A broker that this process or another one started: known by its port and PID."""

    pid = 0

    def alive(self) -> bool:
        return alive(self.pid)


def alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie (exited, not yet reaped by whoever adopted it) does not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def stop_pid(pid: int) -> None:
    """Stop a broker another process started (its own process group): it is no child of this
    process, so its exit is polled for rather than waited on."""
    for signum, within in ((signal.SIGTERM, STOP_S), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)
        deadline = time.monotonic() + within
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not alive(pid):
            return


@contextlib.contextmanager
def shared_kafka(root: Path) -> Iterator[SharedKafka]:
    """The broker of every process that shares `root`: started here when none is up."""
    state, lock = root / "shared-kafka.json", root / "shared-kafka.lock"
    with locked(lock):
        info = json.loads(state.read_text()) if state.exists() else {}
        if info and alive(info["pid"]):
            broker = SharedKafka(port=info["port"], log_file=Path(info["log"]))
        else:
            broker = SharedKafka(log_file=root / "shared-kafka.log").start()
            assert broker.process is not None
            assert broker.workdir is not None
            info = {"port": broker.port, "pid": broker.process.pid, "users": 0,
                    "log": str(broker.log_file), "workdir": str(broker.workdir)}  # fmt: skip
        broker.pid = info["pid"]
        info["users"] += 1
        state.write_text(json.dumps(info))
    try:
        yield broker
    finally:
        with locked(lock):
            info = json.loads(state.read_text())
            info["users"] -= 1
            if info["users"] > 0:
                state.write_text(json.dumps(info))
            else:
                state.unlink()
                if broker.process is not None:
                    broker.stop()  # started here: stopped, reaped, its directory removed
                else:
                    stop_pid(info["pid"])
                    shutil.rmtree(info["workdir"], ignore_errors=True)
