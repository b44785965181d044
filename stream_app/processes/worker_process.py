"""A worker subprocess and its `/metrics`, one way for the demo, the benchmark and the tests.

`stream-app demo`, `bench/run.py` and `tests/integration/harness.py` all run
`python -m stream_app worker` as a child and read its `/metrics`: `WorkerProcess` and
`scrape_metrics` are how they do it. The worker runs in its own session, so `stop_process` ends
it and whatever it spawned, nothing else.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from prometheus_client.parser import text_string_to_metric_families

from stream_app.ports import free_port, local_url
from stream_app.processes import stop_process

# One sample of a scrape: (sample name, its labels sorted by name).
SampleKey = tuple[str, tuple[tuple[str, str], ...]]
Samples = dict[SampleKey, float]


def parse_metrics(text: str) -> Samples:
    """Read a Prometheus text exposition into plain values that tests and tools can look up."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape_metrics(url: str, timeout: float = 5.0) -> Samples:
    """Fetch and parse a `/metrics` page: the one scraper of the demo, the benchmark and tests.

    Raises:
        OSError: the page could not be fetched (`urllib.error.HTTPError` for a non-2xx answer).
    """
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return parse_metrics(response.read().decode())


def metric_total(samples: Samples, name: str, **labels: str) -> float:
    """Sum a sample over the label sets that include `labels`, so callers need not spell all."""
    wanted = set(labels.items())
    return math.fsum(
        value for (sample, keys), value in samples.items() if sample == name and wanted <= set(keys)
    )


class WorkerExited(RuntimeError):
    """The worker subprocess ended while it was expected to run; carries its status and log."""

    def __init__(self, name: str, returncode: int, tail: list[str]) -> None:
        """Keep the status and the last log lines, and say both in one line."""
        super().__init__(f"{name} exited with status {returncode}: " + " | ".join(tail))
        self.returncode = returncode
        self.tail = tail


class WorkerProcess:
    """`python -m stream_app worker` as a user runs it, as a child we can wait for and stop.

    The worker gets its own web port, log file (`<workdir>/<name>.log`) and data directory
    (`<workdir>/<name>-data`), and runs in its own session so that stopping it stops
    everything it spawned.
    """

    def __init__(
        self,
        workdir: Path,
        name: str = "worker",
        *,
        broker_url: str,
        partitions: int,
        port: int | None = None,
        bind: str | None = None,
        command: Sequence[str] | None = None,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Prepare the command line and environment; nothing starts before `start`.

        `name` names the log file, the data directory and the worker in errors; `broker_url`,
        `partitions` and `bind` (the worker's loopback when omitted) become `EVALSTREAM_*`
        variables; `port`, the web port, is a free one when omitted; `command` runs instead of
        `python -m stream_app worker` (a test's faulty worker); `cwd` is ours when omitted; `env`
        is applied last."""
        self.name = name
        self.port = free_port() if port is None else port
        self.base_url = local_url(bind, self.port)
        self.log_path = workdir / f"{name}.log"
        self.command = list(command or [sys.executable, "-m", "stream_app", "worker"])
        self.cwd = cwd
        self.env = {
            **os.environ,
            "EVALSTREAM_BROKER_URL": broker_url,
            "EVALSTREAM_PARTITIONS": str(partitions),
            "EVALSTREAM_WEB_PORT": str(self.port),
            **({"EVALSTREAM_WEB_BIND": bind} if bind is not None else {}),
            "EVALSTREAM_DATA_DIR": str(workdir / f"{name}-data"),
            **(env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        """Start the worker, its output appended to the log file; returns self for chaining."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def log_tail(self, lines: int = 5) -> list[str]:
        """The last lines of the log, to say why a worker died."""
        if not self.log_path.exists():
            return []
        return self.log_path.read_text(errors="replace").strip().splitlines()[-lines:]

    def check_alive(self) -> None:
        """Fail fast instead of waiting on a worker that has already exited.

        Raises:
            WorkerExited: the worker was started and has exited.
        """
        if self.process is not None and self.process.poll() is not None:
            raise WorkerExited(self.name, self.process.returncode, self.log_tail())

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
        """GET one of the worker's pages; `(0, b"")` while nothing answers."""
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except OSError:
            return 0, b""

    def ready(self, timeout: float = 2.0) -> bool:
        """Whether `/readyz` answers 200; raises `WorkerExited` rather than wait on a dead one."""
        self.check_alive()
        return self.get("/readyz", timeout)[0] == 200

    def wait_ready(self, timeout: float = 90, interval: float = 0.25) -> Self:
        """Block until the worker has joined the group and is ready; returns self.

        Raises:
            WorkerExited: the worker exited while we waited.
            TimeoutError: it did not become ready within `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while not self.ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not become ready within {timeout:.0f} s")
            time.sleep(interval)
        return self

    async def wait_ready_async(self, timeout: float = 120, interval: float = 0.5) -> None:
        """`wait_ready` for an event loop that must stay responsive (Ctrl-C in the demo)."""
        deadline = time.monotonic() + timeout
        while not self.ready(timeout=1):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not become ready within {timeout:.0f} s")
            await asyncio.sleep(interval)

    def metrics(self, timeout: float = 5.0) -> Samples:
        """The worker's `/metrics`, parsed (see `scrape_metrics`)."""
        return scrape_metrics(self.base_url + "/metrics", timeout)

    def kill(self) -> None:
        """SIGKILL the worker's process group: a crash, for the chaos tests."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self, timeout: float = 20.0) -> int | None:
        """Stop the worker (see `stop_process`); its exit status, None if it never started."""
        if self.process is None:
            return None
        return stop_process(self.process, timeout)
