"""The webhook receiver, Alertmanager and Prometheus of `stream-app observe`, started together
in a temp dir (generated configs and data) and stopped together, whatever fails in between."""

from __future__ import annotations

import glob
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final, Self, TextIO

import yaml

from stream_app.observe import LOOPBACK, ObserveError
from stream_app.observe.config import ObserveConfig, alertmanager_config, prometheus_config
from stream_app.observe.receiver import AlertReceiver
from stream_app.observe.tools import Tools, find_tools
from stream_app.ports import cannot_listen
from stream_app.processes import Stoppable, stop_process

READY_TIMEOUT_S: Final = 60.0
LOG_TAIL_LINES: Final = 12


class ChildExited(Exception):
    """Prometheus or Alertmanager ended by itself; says which, its status and its log's end."""

    def __init__(self, name: str, returncode: int, tail: Sequence[str]) -> None:
        hint = ""
        if any("default.tmpl" in line for line in tail):
            hint = "\n  (run scripts/install-prometheus.sh: it repairs an older .tools/)"
        lines = "\n".join(f"  | {line}" for line in tail) or "  | (empty log)"
        super().__init__(
            f"{name} exited with status {returncode}; the end of its log:\n{lines}{hint}"
        )
        self.name = name
        self.returncode = returncode


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP arrived while the stack was starting."""


@dataclass
class _Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]
    url: str

    def tail(self) -> list[str]:
        self.log.flush()
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text.strip().splitlines()[-LOG_TAIL_LINES:]


def _check_port_free(port: int, option: str, what: str) -> None:
    if cannot_listen(LOOPBACK, port) is not None:
        raise ObserveError(
            f"port {port} on {LOOPBACK} is busy ({what} would listen there): "
            f"choose another with {option}"
        )


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=1) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


class ObserveStack(Stoppable):
    """The webhook receiver, Alertmanager and Prometheus, started together in a temp dir and
    stopped together (by PID, each in its own session), whatever fails in between."""

    def __init__(
        self,
        config: ObserveConfig,
        *,
        out: TextIO | None = None,
        raw_json: bool = False,
        tools: Tools | None = None,
        stop_event: threading.Event | None = None,
    ) -> None:
        self.config = config
        self.tools = tools
        self.receiver = AlertReceiver(out=out, raw_json=raw_json, port=config.webhook_port)
        self.stop_event = stop_event or threading.Event()
        self.workdir: Path | None = None
        self.children: list[_Child] = []
        self.prometheus_url = f"http://{LOOPBACK}:{config.prometheus_port}"
        self.alertmanager_url = f"http://{LOOPBACK}:{config.alertmanager_port}"

    def start(self) -> Self:
        """Start the three parts and wait until Prometheus and Alertmanager are ready.

        Raises:
            ObserveError: something the user can fix (binary, port, rules).
            ChildExited: Prometheus or Alertmanager exited while starting.
            Interrupted: the stop event was set meanwhile.
        """
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        config = self.config
        ports = [config.prometheus_port, config.alertmanager_port, config.webhook_port or None]
        if len(set(ports)) < len(ports):
            raise ObserveError(
                "--prometheus-port, --alertmanager-port and --webhook-port must differ"
            )
        tools = self.tools or find_tools(config.tools_home)
        self.tools = tools
        rules = [path for pattern in config.rule_files() for path in glob.glob(pattern)]
        if not rules:
            raise ObserveError(f"no rule files match {', '.join(config.rule_files())}")
        _check_port_free(config.prometheus_port, "--prometheus-port", "Prometheus")
        _check_port_free(config.alertmanager_port, "--alertmanager-port", "Alertmanager")
        self.workdir = Path(tempfile.mkdtemp(prefix="evalstream-observe-"))
        self.receiver.start()
        am_config = self.workdir / "alertmanager.yml"
        am_config.write_text(
            yaml.safe_dump(alertmanager_config(config, self.receiver.url), sort_keys=False)
        )
        prom_config = self.workdir / "prometheus.yml"
        prom_config.write_text(yaml.safe_dump(prometheus_config(config), sort_keys=False))
        self._spawn(
            "Alertmanager",
            [
                str(tools.alertmanager),
                f"--config.file={am_config}",
                f"--storage.path={self.workdir / 'alertmanager'}",
                f"--web.listen-address={LOOPBACK}:{config.alertmanager_port}",
                f"--web.external-url={self.alertmanager_url}/",
                "--cluster.listen-address=",  # no HA gossip (it would listen on 0.0.0.0:9094)
                *tools.alertmanager_flags(),
            ],
            self.alertmanager_url,
            cwd=tools.alertmanager_cwd(),
        )
        self._spawn(
            "Prometheus",
            [
                str(tools.prometheus),
                f"--config.file={prom_config}",
                f"--storage.tsdb.path={self.workdir / 'prometheus'}",
                f"--web.listen-address={LOOPBACK}:{config.prometheus_port}",
                f"--web.external-url={self.prometheus_url}/",
                *tools.prometheus_flags(),
            ],
            self.prometheus_url,
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = list(self.children)
        while waiting:
            if self.stop_event.is_set():
                raise Interrupted
            self.check()
            waiting = [child for child in waiting if not _ready(child.url)]
            if waiting and time.monotonic() > deadline:
                names = " and ".join(child.name for child in waiting)
                raise ObserveError(f"{names} not ready after {READY_TIMEOUT_S:.0f} s")
            if waiting:
                time.sleep(0.2)

    def _spawn(self, name: str, command: list[str], url: str, cwd: Path | None = None) -> None:
        assert self.workdir is not None
        log_path = self.workdir / f"{name.lower()}.log"
        log = log_path.open("wb")
        try:
            process = subprocess.Popen(
                command,
                cwd=cwd or self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # our Ctrl-C is not theirs: we stop them in order
            )
        except OSError as exc:
            log.close()
            raise ObserveError(f"cannot start {name} ({command[0]}): {exc.strerror}") from None
        self.children.append(_Child(name, process, log_path, log, url))

    def check(self) -> None:
        """Raise `ChildExited` when Prometheus or Alertmanager is no longer running."""
        for child in self.children:
            if child.process.poll() is not None:
                raise ChildExited(child.name, child.process.returncode, child.tail())

    def stop(self) -> None:
        """Stop Prometheus, then Alertmanager, then the receiver; remove the temp dir.
        Idempotent."""
        for child in reversed(self.children):
            stop_process(child.process, timeout=15)
            child.log.close()
        self.children = []
        self.receiver.stop()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
