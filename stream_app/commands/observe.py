"""`stream-app observe`: the project's alerts without Docker. Starts the installed Prometheus and
Alertmanager on loopback against local workers, with the repository's rules, and prints every
notification Alertmanager sends to an in-process webhook receiver.

The parts are separate so that tests can reuse them: `prometheus_config` and
`alertmanager_config` build the configs, `AlertReceiver` is the webhook, `ObserveStack` starts
and stops the three with the intervals as arguments, and `run_observe` is the command around them.
Generated configs and data live in a temp dir removed when the stack stops.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import glob
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any, Final, Self, TextIO

import yaml

from stream_app.commands.broker import port_open
from stream_app.commands.processes import stop_process, stop_signals
from stream_app.commands.terminal_text import printable
from stream_app.service.settings import ConfigError, load_settings

LOOPBACK: Final = "127.0.0.1"
EXIT_OK: Final = 0
EXIT_CHILD_EXITED: Final = 1
EXIT_USAGE: Final = 2
READY_TIMEOUT_S: Final = 60.0
LOG_TAIL_LINES: Final = 12
RUNBOOK_LABEL: Final = "runbook_base_url"
"""The external label the alerts' runbook links start with (prometheus/rules)."""


def repository_root() -> Path:
    """The checkout holding prometheus/: this file's, or else the working directory (an
    installed package has no rules beside it)."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "prometheus" / "rules").is_dir() else Path.cwd()


# Where scripts/install-prometheus.sh unpacks Debian's packages; a module attribute for tests.
TOOLS_DIR: Path = Path(__file__).resolve().parents[2] / ".tools" / "prometheus"


class ObserveError(Exception):
    """A problem the user can fix before anything runs (binary missing, port busy); one line."""


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


# ---- options -------------------------------------------------------------------------------

_DURATION = re.compile(r"(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?")


def parse_duration(text: str) -> str:
    """A positive Prometheus duration (`15s`, `1m30s`), or whole seconds (`2` is `2s`)."""
    value = text.strip()
    if value.isdigit():
        value += "s"
    if not value or text != text.strip() or not _DURATION.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 15s, 1m or 500ms")
    if not any(ch in "123456789" for ch in value):
        raise argparse.ArgumentTypeError(f"{text!r}: the duration must be longer than zero")
    return value


def parse_target(text: str) -> str:
    """HOST:PORT of a worker's web server (`[::1]:6066` for IPv6)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (for example 127.0.0.1:6066)")
    return text


def _port(text: str) -> int:
    """A port to listen on: 1-65535."""
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def _port_or_any(text: str) -> int:
    """A port, or 0: any free one."""
    return 0 if text.isdigit() and int(text) == 0 else _port(text)


def default_targets(config_file: Path | None) -> tuple[str, ...]:
    """The local worker: 127.0.0.1 and the settings' web port (what demo and worker listen on)."""
    return (f"{LOOPBACK}:{load_settings(config_file).web_port}",)


@dataclass(frozen=True)
class ObserveConfig:
    """What to run: ports, targets and the intervals (production's by default; tests shorten
    them). `group_interval` None keeps prometheus/alertmanager.yml's."""

    targets: tuple[str, ...]
    prometheus_port: int = 9090
    alertmanager_port: int = 9093
    webhook_port: int = 0
    scrape_interval: str = "15s"
    evaluation_interval: str = "15s"
    group_wait: str = "30s"
    group_interval: str | None = None
    runbook_base_url: str | None = None
    repo: Path = field(default_factory=repository_root)

    @property
    def runbooks(self) -> str:
        """The runbook base: the option, or the README of this checkout as a file:// URL."""
        return self.runbook_base_url or (self.repo / "README.md").resolve().as_uri()

    def rule_files(self) -> list[str]:
        """prometheus/prometheus.yml's rule_files, resolved against prometheus/ as Prometheus
        would: the rules are read where they are, never copied."""
        base = self.repo / "prometheus"
        patterns = ["rules/*.yml"]
        production = base / "prometheus.yml"
        if production.is_file():
            patterns = yaml.safe_load(production.read_text()).get("rule_files") or patterns
        return [str(base / p) if not Path(p).is_absolute() else p for p in patterns]


# ---- configs -------------------------------------------------------------------------------


def prometheus_config(config: ObserveConfig) -> dict[str, Any]:
    """prometheus.yml: the workers as job `evalstream`, Prometheus itself (its consoles read
    it), the repository's rules, our Alertmanager, and `runbook_base_url` as an external label
    for the alerts' runbook links."""
    return {
        "global": {
            "scrape_interval": config.scrape_interval,
            "evaluation_interval": config.evaluation_interval,
            "external_labels": {RUNBOOK_LABEL: config.runbooks},
        },
        "rule_files": config.rule_files(),
        "alerting": {
            "alertmanagers": [
                {"static_configs": [{"targets": [f"{LOOPBACK}:{config.alertmanager_port}"]}]}
            ]
        },
        "scrape_configs": [
            {
                "job_name": "evalstream",
                "metrics_path": "/metrics",
                "static_configs": [{"targets": list(config.targets)}],
            },
            {
                "job_name": "prometheus",
                "static_configs": [{"targets": [f"{LOOPBACK}:{config.prometheus_port}"]}],
            },
        ],
    }


def _retime(route: dict[str, Any], key: str, value: str | None, root: bool) -> None:
    if value is not None and (root or key in route):
        route[key] = value
    for child in route.get("routes") or []:
        _retime(child, key, value, root=False)


def alertmanager_config(config: ObserveConfig, webhook_url: str) -> dict[str, Any]:
    """alertmanager.yml: production's routes, grouping and inhibit rules
    (prometheus/alertmanager.yml), every receiver replaced by our webhook, the group waits
    shortened when asked."""
    production: dict[str, Any] = yaml.safe_load(
        (config.repo / "prometheus" / "alertmanager.yml").read_text()
    )
    route = copy.deepcopy(production["route"])
    _retime(route, "group_wait", config.group_wait, root=True)
    _retime(route, "group_interval", config.group_interval, root=True)
    receivers = [
        {"name": r["name"], "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}
        for r in production["receivers"]
    ]
    doc: dict[str, Any] = {"route": route, "receivers": receivers}
    if production.get("inhibit_rules"):
        doc["inhibit_rules"] = copy.deepcopy(production["inhibit_rules"])
    return doc


# ---- the binaries --------------------------------------------------------------------------


def find_tool(names: Sequence[str], tools_dir: Path | None = None) -> Path:
    """The first of `names` in .tools/prometheus/usr/bin, else on PATH."""
    directory = (TOOLS_DIR if tools_dir is None else tools_dir) / "usr" / "bin"
    for name in names:
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    for name in names:
        found = shutil.which(name)
        if found:
            return Path(found)
    raise ObserveError(
        f"{names[0]} not found in .tools/prometheus or on PATH: run scripts/install-prometheus.sh"
    )


@dataclass(frozen=True)
class Tools:
    """The two binaries and the flags Debian's builds need to find their web assets and
    templates when unpacked under .tools/ instead of /usr/share (see the install script)."""

    prometheus: Path
    alertmanager: Path

    @staticmethod
    def _root(binary: Path) -> Path:
        return binary.parent.parent.parent  # <root>/usr/bin/<name>

    def prometheus_flags(self) -> list[str]:
        """--web.local-assets (the classic UI's templates and static files) and the console
        directories, where Debian's layout has them next to the binary."""
        root = self._root(self.prometheus)
        flags = []
        web = root / "usr" / "share" / "prometheus" / "web"
        if (web / "templates" / "_base.html").is_file():
            flags.append(f"--web.local-assets={web}/")
        etc = root / "etc" / "prometheus"
        if (etc / "console_libraries" / "prom.lib").is_file():
            flags += [
                f"--web.console.templates={etc / 'consoles'}",
                f"--web.console.libraries={etc / 'console_libraries'}",
            ]
        return flags

    @property
    def alertmanager_share(self) -> Path:
        """Where Debian's Alertmanager keeps its templates and UI pages."""
        return self._root(self.alertmanager) / "usr" / "share" / "prometheus" / "alertmanager"

    @property
    def alertmanager_has_ui(self) -> bool:
        """Debian's Alertmanager ships no web UI, only a page of links (`no-ui`)."""
        return (
            not (self.alertmanager_share / "no-ui" / "index.html").is_file()
            or (self.alertmanager_share / "ui" / "index.html").is_file()
        )

    def alertmanager_flags(self) -> list[str]:
        """--web.ui-path for Debian's build (the UI if one was built, else its page of links)."""
        share = self.alertmanager_share
        for ui in (share / "ui", share / "no-ui"):
            if (ui / "index.html").is_file():
                return [f"--web.ui-path={ui}/"]
        return []

    def alertmanager_cwd(self) -> Path | None:
        """Debian's Alertmanager reads default.tmpl from a directory compiled into it; the
        install script rewrites it to usr/share/prometheus/alertmanager relative to the working
        directory, so the .tools/ one starts in .tools/prometheus."""
        return self._root(self.alertmanager) if self.alertmanager_share.is_dir() else None


def find_tools(tools_dir: Path | None = None) -> Tools:
    """Prometheus and Alertmanager (Debian names it prometheus-alertmanager)."""
    return Tools(
        prometheus=find_tool(("prometheus",), tools_dir),
        alertmanager=find_tool(("prometheus-alertmanager", "alertmanager"), tools_dir),
    )


# ---- the webhook receiver ------------------------------------------------------------------

FIELD_WIDTH: Final = 12


def _text(value: object, keep_newlines: bool = False) -> str:
    """A JSON value of a notification as text safe on a terminal: labels carry what producers
    sent (an experiment id is any 1-200 characters); annotations may keep their newlines."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return printable(text, keep_newlines)


def _field(name: str, value: object, keep_newlines: bool = False) -> list[str]:
    text = _text(value, keep_newlines) if value not in (None, "") else "-"
    first, *rest = text.splitlines() or ["-"]
    pad = " " * (FIELD_WIDTH + 3)
    return [f"  {_text(name):<{FIELD_WIDTH}} {first}", *(pad + line for line in rest)]


UNSHOWN_LABELS: Final = frozenset({"alertname", RUNBOOK_LABEL})
"""Labels not printed as such: the name heads the block, and the runbook base is in the link."""


def _label_order(labels: Mapping[str, Any]) -> list[str]:
    """The alert's labels to print: experiment, tier and severity first (what a tier alert is
    about), then the others (EvalStreamDown's instance, EvalEventsRejected's reason)."""
    first = [name for name in ("experiment", "tier", "severity") if name in labels]
    return first + sorted(set(labels) - UNSHOWN_LABELS - set(first), key=str)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def format_notification(payload: Mapping[str, Any], received: datetime | None = None) -> str:
    """One notification as a block a person reads: a header with the status and the group,
    then per alert its status, name, labels, annotations (a dash when missing) and times.
    Whatever the JSON holds, it prints (what it cannot read, as a dash or as JSON)."""
    alerts = payload.get("alerts")
    alerts = alerts if isinstance(alerts, list) else []
    status = _text(payload.get("status", "?"))
    group = ", ".join(
        f'{_text(k)}="{_text(v)}"' for k, v in _mapping(payload.get("groupLabels")).items()
    )
    when = (received or datetime.now()).strftime("%H:%M:%S")
    count = f"{len(alerts)} alert" + ("" if len(alerts) == 1 else "s")
    lines = [
        f"-- {when} Alertmanager notification: {status}, {count}" + (f" ({group})" if group else "")
    ]
    for item in alerts:
        alert = _mapping(item)
        labels = _mapping(alert.get("labels"))
        notes = _mapping(alert.get("annotations"))
        state = _text(alert.get("status", status))
        lines.append(f"{state.upper()}  {_text(labels.get('alertname', '-'))}")
        for name in _label_order(labels):
            lines += _field(name, labels[name])
        for name in ("summary", "description", "runbook_url"):
            lines += _field(name, notes.get(name), keep_newlines=True)
        lines += _field("startsAt", alert.get("startsAt"))
        if state == "resolved":
            lines += _field("endsAt", alert.get("endsAt"))
    return "\n".join(lines)


class AlertReceiver:
    """Alertmanager's webhook target, in-process on loopback: prints each notification (a block,
    or the raw JSON) and keeps them for tests."""

    path: Final = "/alerts"

    def __init__(
        self,
        out: TextIO | None = None,
        raw_json: bool = False,
        port: int = 0,
        host: str = LOOPBACK,
    ) -> None:
        self._out = out
        self.raw_json = raw_json
        self.host = host
        self.port = port
        self._lock = threading.Lock()
        self._received: list[dict[str, Any]] = []
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Where Alertmanager posts (the port is known once started)."""
        return f"http://{self.host}:{self.port}{self.path}"

    def notifications(self) -> list[dict[str, Any]]:
        """The notifications received so far, oldest first."""
        with self._lock:
            return list(self._received)

    def _handle(self, body: bytes) -> bool:
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            print("observe: the webhook received a body that is not a JSON object", file=sys.stderr)
            return False
        # --json: re-encoded with every non-ASCII character escaped, so that no byte of it
        # drives the terminal either (jq reads it the same).
        text = json.dumps(payload) if self.raw_json else format_notification(payload)
        out = self._out or sys.stdout
        with self._lock:
            self._received.append(payload)
            with contextlib.suppress(OSError, ValueError):
                out.write(text + ("\n" if self.raw_json else "\n\n"))
                out.flush()
        return True

    def start(self) -> Self:
        """Listen (a free port when `port` is 0) and serve on a daemon thread.

        Raises:
            ObserveError: the port is taken.
        """
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.path != receiver.path:
                    self.send_error(404)
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200 if receiver._handle(body) else 400)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the notifications are the output, not the requests."""

        try:
            server = http.server.ThreadingHTTPServer((self.host, self.port), Handler)
        except OSError as exc:
            raise ObserveError(
                f"webhook port {self.port} on {self.host} is busy ({exc.strerror}): "
                "choose another with --webhook-port"
            ) from None
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# ---- the stack -----------------------------------------------------------------------------


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
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            raise ObserveError(
                f"port {port} on {LOOPBACK} is busy ({what} would listen there): "
                f"choose another with {option}"
            ) from None


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=1) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


class ObserveStack:
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

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
        tools = self.tools or find_tools()
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


# ---- the command ---------------------------------------------------------------------------


def start_block(stack: ObserveStack) -> str:
    """What runs where and how to see the alerts, printed once everything is ready."""
    config, prom, am = stack.config, stack.prometheus_url, stack.alertmanager_url
    rules = ", ".join(config.rule_files())
    ui = (
        ""
        if stack.tools is None or stack.tools.alertmanager_has_ui
        else "  (Debian's build has no web UI: its page lists the API; amtool works)"
    )
    lines = [
        "evalstream observe: Prometheus and Alertmanager on loopback; alerts are printed here",
        f"  scraping       {', '.join(config.targets)} (job evalstream) every "
        f"{config.scrape_interval}",
        f"  rules          {rules}, evaluated every {config.evaluation_interval}",
        f"  Prometheus     {prom}/classic/alerts   (also {prom}/classic/graph, /classic/rules, "
        "/classic/targets, /consoles/prometheus.html)",
        f"  Alertmanager   {am}/{ui}",
        f"                 {am}/api/v2/alerts, or: amtool --alertmanager.url={am} alert query",
        f"  notifications  Alertmanager -> {stack.receiver.url}, printed below "
        f"(group_wait {config.group_wait}; tier alerts held back while no worker is up)",
        f"  runbooks       {config.runbooks}",
        f"  temp dir       {stack.workdir} (configs and data, removed on exit)",
    ]
    for target in config.targets:
        host, _, port = target.rpartition(":")
        if not port_open(host.strip("[]"), int(port)):
            lines.append(
                f"Nothing answers on {target} yet: start a worker (make demo, or stream-app "
                "worker); until one does, EvalStreamNoWorker will fire."
            )
    lines.append("Ctrl-C stops it.")
    return "\n".join(lines)


def run_observe(config: ObserveConfig, raw_json: bool = False) -> int:
    """Run the stack until SIGINT, SIGTERM or SIGHUP (0), or until a child exits by itself (1).

    Raises:
        ObserveError: something the user can fix; nothing is left running.
    """
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # SIGHUP too: a closed terminal must not leave Prometheus and Alertmanager (each in a
    # session of its own) running on their ports.
    previous = {sig: signal.signal(sig, on_signal) for sig in stop_signals()}
    stack = ObserveStack(config, raw_json=raw_json, stop_event=stop)
    try:
        stack.start()
        print(start_block(stack), flush=True)
        while not stop.wait(0.2):
            stack.check()
        code = EXIT_OK
    except Interrupted:
        code = EXIT_OK
    except ChildExited as exc:
        print(f"stream-app observe: {exc}", file=sys.stderr, flush=True)
        code = EXIT_CHILD_EXITED
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(
        "observe: stopped Prometheus, Alertmanager and the receiver; temp dir removed", flush=True
    )
    return code


def _cmd_observe(args: argparse.Namespace) -> int:
    try:
        targets = tuple(args.target) if args.target else default_targets(args.config)
        config = ObserveConfig(
            targets=targets,
            prometheus_port=args.prometheus_port,
            alertmanager_port=args.alertmanager_port,
            webhook_port=args.webhook_port,
            scrape_interval=args.scrape_interval,
            evaluation_interval=args.evaluation_interval,
            group_wait=args.group_wait,
            runbook_base_url=args.runbook_base_url,
        )
        return run_observe(config, raw_json=args.json)
    except (ObserveError, ConfigError) as exc:
        print(f"stream-app observe: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def add_observe_parser(sub: Any) -> argparse.ArgumentParser:
    """Add `observe` to a `stream-app` subparsers object, its handler set."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "observe",
        help="Prometheus and Alertmanager on loopback against the local worker(s), with the "
        "project's rules; alerts printed as they arrive (Ctrl-C stops)",
        description=(
            "Start the installed Prometheus and Alertmanager (scripts/install-prometheus.sh) on "
            "127.0.0.1 against local workers, with prometheus/rules/*.yml and the routing of "
            "prometheus/alertmanager.yml, and print every notification Alertmanager sends. "
            "Everything it starts stops on Ctrl-C; its temp dir is removed."
        ),
    )
    parser.add_argument(
        "--target",
        action="append",
        type=parse_target,
        metavar="HOST:PORT",
        help="a worker's web address, repeatable (default: 127.0.0.1 and the settings' web_port)",
    )
    parser.add_argument("--prometheus-port", type=_port, default=9090, help="(9090)")
    parser.add_argument("--alertmanager-port", type=_port, default=9093, help="(9093)")
    parser.add_argument(
        "--webhook-port",
        type=_port_or_any,
        default=0,
        help="the alert receiver's port (default: any free one)",
    )
    parser.add_argument("--scrape-interval", type=parse_duration, default="15s", help="(15s)")
    parser.add_argument(
        "--evaluation-interval", type=parse_duration, default="15s", help="rule evaluation (15s)"
    )
    parser.add_argument(
        "--group-wait",
        type=parse_duration,
        default="30s",
        help="Alertmanager's wait before a new group's first notification (30s)",
    )
    parser.add_argument(
        "--runbook-base-url",
        metavar="URL",
        help="where the alerts' runbook links point (default: this checkout's README.md)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print each notification's JSON as received"
    )
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="YAML or TOML config file (for web_port)"
    )
    parser.set_defaults(handler=_cmd_observe)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m stream_app.commands.observe [options]`, the same as `stream-app observe`."""
    parser = argparse.ArgumentParser(prog="stream-app")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_observe_parser(sub)
    args = parser.parse_args(["observe", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
