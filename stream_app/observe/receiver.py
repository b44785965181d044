"""Alertmanager's webhook target for `stream-app observe`, in-process on loopback: each
notification printed as a block a person reads (or as its JSON), whatever the JSON holds, and
kept for tests."""

from __future__ import annotations

import contextlib
import http.server
import json
import sys
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Self, TextIO

from stream_app import bounded_json
from stream_app.observe import LOOPBACK, ObserveError
from stream_app.observe.config import RUNBOOK_LABEL
from stream_app.terminal.text import printable

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
            payload = bounded_json.loads(body)
        except (ValueError, RecursionError):
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
