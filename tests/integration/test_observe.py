"""`stream-app observe` as a user runs it: the real command starts the installed Prometheus and
Alertmanager against a live worker on the test broker. Checked: the worker is scraped, the
repository's rules are loaded, the web UIs and their assets answer, an alert posted to
Alertmanager reaches the webhook receiver and is printed (the inhibit rules holding back a tier
alert while no worker is up, and not while one of several is down, and a dropped tier's baseline
warning while its page fires), a child that dies is
reported, a busy port is one line, and SIGINT, SIGTERM or SIGHUP leaves no process and no temp
directory behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from stream_app.ports import free_port
from stream_app.processes import stop_process
from tests.helpers import REPO, alive, children, from_a_terminal, prometheus_tool
from tests.integration.harness import Broker, Worker, post_alerts, wait_until

pytestmark = pytest.mark.timeout(60)

RUNBOOKS = "https://git.example/evalstream/docs/runbooks.md"


def require_binaries() -> None:
    """Skip without Prometheus or Alertmanager, except in CI (prometheus_tool fails there)."""
    prometheus_tool("prometheus")
    if not shutil.which("alertmanager"):
        prometheus_tool("prometheus-alertmanager")


def get(url: str, timeout: float = 10) -> tuple[int, bytes]:
    """Status and body of a GET, following redirects; (0, b"") while nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def cmdline(pid: int) -> list[str]:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    return []


class ObserveRun:
    """`python -m stream_app.commands.observe` in its own session, with short intervals, free
    ports and TMPDIR pinned to a directory of the test's, so that leftovers can be seen."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.prometheus_port = free_port()
        self.alertmanager_port = free_port()
        self.prometheus = f"http://127.0.0.1:{self.prometheus_port}"
        self.alertmanager = f"http://127.0.0.1:{self.alertmanager_port}"
        self.tmpdir = tmp_path / "observe-tmp"
        self.tmpdir.mkdir(exist_ok=True)
        self.out_path = tmp_path / "observe.out"
        self.err_path = tmp_path / "observe.err"
        self.started: set[int] = set()
        command = [
            sys.executable,
            "-m",
            "stream_app.commands.observe",
            "--prometheus-port",
            str(self.prometheus_port),
            "--alertmanager-port",
            str(self.alertmanager_port),
            "--scrape-interval",
            "1s",
            "--evaluation-interval",
            "1s",
            "--group-wait",
            "1s",
            *args,
        ]
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.process = subprocess.Popen(
                from_a_terminal(command),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=tmp_path,
                env={**os.environ, "TMPDIR": str(self.tmpdir), "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def errors(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_started(self, timeout: float = 45) -> str:
        def started() -> bool:
            assert self.process.poll() is None, f"observe exited:\n{self.output()}{self.errors()}"
            return "Ctrl-C stops" in self.output()

        wait_until(started, timeout, what="observe's start block")
        self.started = children(self.process.pid)
        return self.output()

    def signal(self, signum: int, timeout: float = 30) -> int:
        os.kill(self.process.pid, signum)
        return self.process.wait(timeout)

    def leftovers(self) -> list[str]:
        """Processes observe started that still run, and files left in its temp directory."""
        left = [f"pid {pid}: {' '.join(cmdline(pid))}" for pid in self.started if alive(pid)]
        return left + [str(p) for p in self.tmpdir.iterdir()]

    def stop(self) -> None:
        """Teardown: stop observe if still running, then any child it left (by PID)."""
        if self.process.poll() is None:
            self.started |= children(self.process.pid)
            stop_process(self.process, timeout=30)
        for pid in self.started:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def query(self, expr: str) -> list[Any]:
        status, body = get(
            f"{self.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        )
        assert status == 200, body
        result: list[Any] = json.loads(body)["data"]["result"]
        return result


@pytest.fixture
def observe_runs(tmp_path: Path) -> Iterator[list[ObserveRun]]:
    runs: list[ObserveRun] = []
    yield runs
    for run in runs:
        run.stop()


def start_observe(runs: list[ObserveRun], tmp_path: Path, *args: str) -> ObserveRun:
    require_binaries()
    run = ObserveRun(tmp_path, *args)
    runs.append(run)
    return run


def rule_groups_in_repository() -> dict[str, Path]:
    groups = {}
    for path in sorted((REPO / "prometheus" / "rules").glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            groups[group["name"]] = path
    return groups


def static_assets(prometheus: str, page: str) -> set[str]:
    """The /classic/static/... scripts, styles and images a classic UI page loads."""
    status, body = get(prometheus + page)
    assert status == 200, (page, body[:300])
    found = re.findall(rb'(?:src|href)="(/classic/static/[^"?]+)', body)
    assert found, page
    return {path.decode() for path in found}


def served(url: str) -> int:
    """The status of a GET without following redirects: a script path that is a directory
    answers 301 (to a listing), which a browser cannot run."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_observe_scrapes_the_worker_with_the_rules_and_serves_the_uis(
    broker: Broker, workers: list[Worker], tmp_path: Path, observe_runs: list[ObserveRun]
) -> None:
    require_binaries()
    worker = Worker(broker, tmp_path, "observed").start()
    workers.append(worker)
    worker.wait_ready()
    target = f"127.0.0.1:{worker.port}"
    run = start_observe(observe_runs, tmp_path, "--target", target, "--runbook-base-url", RUNBOOKS)
    block = run.wait_started()
    for text in (run.prometheus, run.alertmanager, target, "/classic/alerts", RUNBOOKS):
        assert text in block, text
    assert len(run.started) >= 2, run.started  # Prometheus and Alertmanager

    # Prometheus scrapes the worker.
    wait_until(
        lambda: run.query(f'up{{job="evalstream", instance="{target}"}} == 1'),
        20,
        what="up == 1 for the worker",
    )
    # The rules are the repository's own files, every group of them.
    status, body = get(run.prometheus + "/api/v1/rules")
    assert status == 200
    loaded = {g["name"]: Path(g["file"]) for g in json.loads(body)["data"]["groups"]}
    assert loaded == rule_groups_in_repository()
    status, body = get(run.prometheus + "/api/v1/status/config")
    config = yaml.safe_load(json.loads(body)["data"]["yaml"])
    assert config["global"]["external_labels"] == {"runbook_base_url": RUNBOOKS}

    # The web UIs answer, with every asset their pages load.
    for page in ("/graph", "/classic/alerts", "/classic/rules", "/classic/targets"):
        status, body = get(run.prometheus + page)
        assert status == 200, (page, body[:300])
    assert b"TierDropped" in get(run.prometheus + "/classic/alerts")[1]
    consoles = get(run.prometheus + "/consoles/prometheus.html")
    assert consoles[0] == 200, consoles[1][:300]
    assets = (
        static_assets(run.prometheus, "/classic/graph")
        | static_assets(run.prometheus, "/classic/alerts")
        | static_assets(run.prometheus, "/consoles/prometheus.html")
    )
    broken = {
        path: code for path in sorted(assets) if (code := served(run.prometheus + path)) != 200
    }
    assert not broken, broken
    # The consoles' menu links lead to pages this Prometheus serves.
    links = re.findall(rb'class="nav-link" href="(/[^"]*)"', consoles[1])
    assert links, consoles[1][:300]
    dead = {link: code for link in links if (code := get(run.prometheus + link.decode())[0]) != 200}
    assert not dead, dead
    assert get(run.alertmanager + "/")[0] == 200
    status, body = get(run.alertmanager + "/api/v2/status")
    assert status == 200
    assert "inhibit_rules" in json.loads(body)["config"]["original"]

    # Ctrl-C stops everything observe started and removes its temp directory.
    assert run.signal(signal.SIGINT) == 0, run.errors()
    wait_until(lambda: not run.leftovers(), 5, what="no process or file left")
    assert run.errors() == ""


def sentinel(run: ObserveRun, name: str) -> None:
    """Post an alert that no inhibit rule holds back, in a group of its own (named `name`), and
    wait until observe has printed it: the positive sign that Alertmanager has sent whatever it
    would of the alerts posted before it. Alertmanager sends a new group one group_wait after
    its first alert came (--group-wait, which production's routes do not override), so a group
    that came earlier goes out earlier; an alert it holds back is never sent."""
    labels = {"alertname": name, "severity": "info"}
    post_alerts(run.alertmanager, [{"labels": labels, "startsAt": datetime.now(UTC).isoformat()}])
    wait_until(lambda: f"FIRING  {name}" in run.output(), 20, what=f"{name} printed")


def test_an_alert_through_alertmanager_is_printed_and_tier_alerts_are_inhibited(
    tmp_path: Path, observe_runs: list[ObserveRun]
) -> None:
    # No worker: this test is about the Alertmanager -> receiver leg only.
    run = start_observe(observe_runs, tmp_path, "--target", f"127.0.0.1:{free_port()}")
    run.wait_started()
    starts_at = datetime.now(UTC).isoformat()
    post_alerts(
        run.alertmanager,
        [
            {
                "labels": {
                    "alertname": "TierDropped",
                    "experiment": "exp-observe",
                    "tier": "T3",
                    "severity": "page",
                },
                "annotations": {
                    "summary": "exp-observe/T3 dropped (score evidence at its threshold)",
                    "description": "The evidence of exp-observe/T3's score detector is at the "
                    "threshold.",
                    "runbook_url": RUNBOOKS + "#runbook-tierdropped",
                },
                "startsAt": starts_at,
            }
        ],
    )
    block = wait_until(
        lambda: "exp-observe/T3 dropped" in run.output() and run.output(),
        20,
        what="the notification printed",
    )
    printed = next(b for b in block.split("\n\n") if "exp-observe/T3 dropped" in b)
    for text in (
        "firing",
        "TierDropped",
        "exp-observe",
        "T3",
        "page",
        "exp-observe/T3 dropped (score evidence at its threshold)",
        "The evidence of exp-observe/T3's score detector is at the threshold.",
        RUNBOOKS + "#runbook-tierdropped",
        "startsAt",
    ):
        assert text in printed, (text, printed)

    # One dead worker among live ones holds nothing back: its EvalStreamDown and a tier alert
    # are both printed.
    def now() -> str:
        return datetime.now(UTC).isoformat()

    def tier_alert(experiment: str, name: str = "TierDropped") -> dict[str, Any]:
        labels = {"alertname": name, "experiment": experiment, "tier": "T4"}
        severity = "page" if name == "TierDropped" else "warning"
        return {"labels": {**labels, "severity": severity}, "startsAt": now()}

    def down(instance: str) -> dict[str, Any]:
        labels = {"alertname": "EvalStreamDown", "instance": instance, "severity": "page"}
        return {"labels": labels, "startsAt": now()}

    post_alerts(run.alertmanager, [down("w2:6066")])
    post_alerts(run.alertmanager, [tier_alert("exp-alive")])
    wait_until(
        lambda: "w2:6066" in run.output() and "exp-alive" in run.output(),
        20,
        what="EvalStreamDown of one worker and a tier alert printed",
    )
    # A tier that dropped holds back its own baseline warning (one incident, one alert), not
    # another tier's.
    post_alerts(
        run.alertmanager,
        [
            tier_alert("exp-alive", "TierRegressedVsBaseline"),
            tier_alert("exp-other", "TierRegressedVsBaseline"),
        ],
    )
    wait_until(lambda: "exp-other" in run.output(), 20, what="the other tier's warning printed")

    def held_back(experiment: str) -> bool:
        body = get(run.alertmanager + "/api/v2/alerts")[1]
        return any(
            a["labels"]["alertname"] == "TierRegressedVsBaseline"
            and a["labels"].get("experiment") == experiment
            and a["status"]["inhibitedBy"]
            for a in json.loads(body)
        )

    wait_until(lambda: held_back("exp-alive"), 10, what="exp-alive's warning held back")
    assert not held_back("exp-other")
    sentinel(run, "SentinelAfterTheWarning")  # what Alertmanager would send of it, it has sent
    blocks = run.output().split("\n\n")
    assert not [b for b in blocks if "TierRegressedVsBaseline" in b and "exp-alive" in b]

    # While no worker is up (EvalStreamNoWorker), tier alerts and EvalStreamDown are held back
    # (the inhibit rules of production). Posted one after the other, each with a fresh
    # startsAt: Alertmanager sends a new group at once, without group_wait, when its alert
    # started longer ago, racing its own inhibitor.
    nobody = {"labels": {"alertname": "EvalStreamNoWorker", "severity": "page"}}
    post_alerts(run.alertmanager, [{**nobody, "startsAt": now()}])
    wait_until(lambda: "EvalStreamNoWorker" in run.output(), 20, what="EvalStreamNoWorker printed")
    post_alerts(run.alertmanager, [tier_alert("exp-inhibited"), down("w3:6066")])

    def inhibited() -> set[str]:
        body = get(run.alertmanager + "/api/v2/alerts")[1]
        return {
            a["labels"]["alertname"]
            for a in json.loads(body)
            if a["status"]["inhibitedBy"]
            and a["labels"].get("experiment", a["labels"].get("instance"))
            in ("exp-inhibited", "w3:6066")
        }

    wait_until(
        lambda: inhibited() == {"TierDropped", "EvalStreamDown"},
        10,
        what="TierDropped and EvalStreamDown inhibited",
    )
    sentinel(run, "SentinelAfterTheInhibited")
    assert "exp-inhibited" not in run.output(), run.output()
    assert "w3:6066" not in run.output(), run.output()

    assert run.signal(signal.SIGTERM) == 0, run.errors()
    wait_until(lambda: not run.leftovers(), 5, what="no process or file left")


def test_json_prints_each_notification_as_alertmanager_sent_it(
    tmp_path: Path, observe_runs: list[ObserveRun]
) -> None:
    run = start_observe(observe_runs, tmp_path, "--target", f"127.0.0.1:{free_port()}", "--json")
    run.wait_started()
    post_alerts(
        run.alertmanager,
        [{"labels": {"alertname": "JsonCheck", "experiment": "e", "tier": "T0"}}],
    )

    def notification() -> dict[str, Any] | None:
        for line in run.output().splitlines():
            if line.startswith("{") and "JsonCheck" in line:
                doc: dict[str, Any] = json.loads(line)
                return doc
        return None

    doc = wait_until(notification, 20, what="the JSON notification")
    assert doc["status"] == "firing"
    assert doc["groupLabels"] == {"alertname": "JsonCheck", "experiment": "e", "tier": "T0"}
    # A closed terminal (SIGHUP) stops it as Ctrl-C does: nothing left running or on disk.
    assert run.signal(signal.SIGHUP) == 0, run.errors()
    wait_until(lambda: not run.leftovers(), 5, what="no process or file left")


def test_a_child_that_dies_is_reported_and_the_rest_stopped(
    tmp_path: Path, observe_runs: list[ObserveRun]
) -> None:
    run = start_observe(observe_runs, tmp_path, "--target", f"127.0.0.1:{free_port()}")
    run.wait_started()
    prometheus = [
        pid
        for pid in run.started
        if any(arg.startswith("--storage.tsdb.path") for arg in cmdline(pid))
    ]
    assert len(prometheus) == 1, [cmdline(pid) for pid in run.started]
    os.kill(prometheus[0], signal.SIGKILL)  # a child of the observe this test started
    assert run.process.wait(30) == 1
    errors = run.errors()
    assert "Prometheus exited" in errors, errors
    assert "Traceback" not in errors
    wait_until(lambda: not run.leftovers(), 5, what="no process or file left")


def test_a_busy_port_is_one_line(tmp_path: Path, observe_runs: list[ObserveRun]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = start_observe(
            observe_runs, tmp_path, "--target", "127.0.0.1:1", "--alertmanager-port", str(port)
        )
        assert run.process.wait(30) == 2
    errors = run.errors()
    assert errors.count("\n") == 1, errors
    assert str(port) in errors
    assert "--alertmanager-port" in errors
    assert "Ctrl-C" not in run.output()
    assert not list(run.tmpdir.iterdir())
