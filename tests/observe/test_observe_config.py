"""`stream-app observe` without starting Prometheus: the generated configs, the options, the
notification printer and the in-process webhook receiver."""

from __future__ import annotations

import argparse
import glob
import io
import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from stream_app.cli.main import main, parse
from stream_app.cli.options import duration, host_port
from stream_app.commands import observe
from stream_app.observe import ObserveError
from stream_app.observe.config import ObserveConfig, alertmanager_config, prometheus_config
from stream_app.observe.receiver import AlertReceiver, format_notification
from stream_app.observe.stack import ObserveStack
from stream_app.observe.tools import find_tool
from tests.helpers import REPO, prometheus_tool

PRODUCTION_AM = yaml.safe_load((REPO / "prometheus" / "alertmanager.yml").read_text())
WEBHOOK = "http://127.0.0.1:4321/alerts"


def config(**overrides: Any) -> ObserveConfig:
    values: dict[str, Any] = {
        "targets": ("127.0.0.1:6066", "127.0.0.1:6067"),
        "prometheus_port": 19090,
        "alertmanager_port": 19093,
        "repo": REPO,
    }
    return ObserveConfig(**{**values, **overrides})


def test_prometheus_config_scrapes_the_targets_with_the_repository_rules() -> None:
    doc = prometheus_config(config(scrape_interval="2s", evaluation_interval="3s"))
    assert doc["global"]["scrape_interval"] == "2s"
    assert doc["global"]["evaluation_interval"] == "3s"
    jobs = {job["job_name"]: job for job in doc["scrape_configs"]}
    assert jobs["evalstream"]["static_configs"] == [
        {"targets": ["127.0.0.1:6066", "127.0.0.1:6067"]}
    ]
    assert jobs["evalstream"]["metrics_path"] == "/metrics"
    assert jobs["prometheus"]["static_configs"] == [{"targets": ["127.0.0.1:19090"]}]
    assert doc["alerting"]["alertmanagers"] == [
        {"static_configs": [{"targets": ["127.0.0.1:19093"]}]}
    ]
    # The rules are read where they live in the repository, not copied.
    loaded = sorted(path for pattern in doc["rule_files"] for path in glob.glob(pattern))
    assert loaded == sorted(str(p) for p in (REPO / "prometheus" / "rules").glob("*.yml"))
    assert all(Path(pattern).is_absolute() for pattern in doc["rule_files"])


def test_runbook_base_url_is_an_external_label_defaulting_to_the_runbooks() -> None:
    default = prometheus_config(config())["global"]["external_labels"]
    assert default == {"runbook_base_url": (REPO / "docs" / "runbooks.md").resolve().as_uri()}
    given = prometheus_config(
        config(runbook_base_url="https://git.example/evalstream/docs/runbooks.md")
    )
    assert given["global"]["external_labels"]["runbook_base_url"] == (
        "https://git.example/evalstream/docs/runbooks.md"
    )


def test_alertmanager_config_routes_like_production_to_the_webhook() -> None:
    doc = alertmanager_config(config(group_wait="1s"), WEBHOOK)
    route, production = doc["route"], PRODUCTION_AM["route"]
    assert route["group_wait"] == "1s"
    for key in ("group_by", "group_interval", "repeat_interval", "receiver", "routes"):
        assert route[key] == production[key], key
    assert doc["inhibit_rules"] == PRODUCTION_AM["inhibit_rules"]
    names = {r["name"] for r in PRODUCTION_AM["receivers"]}
    assert {r["name"] for r in doc["receivers"]} == names
    for receiver in doc["receivers"]:
        assert receiver["webhook_configs"] == [{"url": WEBHOOK, "send_resolved": True}]
    assert set(receiver) == {"name", "webhook_configs"}


def test_group_interval_can_be_shortened_for_tests() -> None:
    doc = alertmanager_config(config(group_wait="1s", group_interval="2s"), WEBHOOK)
    assert doc["route"]["group_interval"] == "2s"


def test_generated_configs_pass_promtool_and_amtool(tmp_path: Path) -> None:
    promtool, amtool = prometheus_tool("promtool"), prometheus_tool("amtool")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(prometheus_config(config())))
    (tmp_path / "alertmanager.yml").write_text(
        yaml.safe_dump(alertmanager_config(config(), WEBHOOK))
    )
    for command in (
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        [amtool, "check-config", str(tmp_path / "alertmanager.yml")],
    ):
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(("text", "expected"), [("15s", "15s"), ("1m30s", "1m30s"), ("2", "2s")])
def test_durations(text: str, expected: str) -> None:
    assert duration(text) == expected


@pytest.mark.parametrize("text", ["", "0", "0s", "1.5s", "fast", "-1s", "10 s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def test_targets() -> None:
    assert host_port("127.0.0.1:6066") == "127.0.0.1:6066"
    assert host_port("worker-1:6067") == "worker-1:6067"
    assert host_port("[::1]:6066") == "[::1]:6066"
    for bad in ("6066", "host:", "host:http", "host:70000", ":6066"):
        with pytest.raises(argparse.ArgumentTypeError):
            host_port(bad)


def notification(status: str = "firing", **alert_overrides: Any) -> dict[str, Any]:
    alert = {
        "status": status,
        "labels": {
            "alertname": "TierDropped",
            "experiment": "synthetic-01",
            "tier": "T5",
            "severity": "page",
        },
        "annotations": {
            "summary": "synthetic-01/T5 dropped (pass_rate evidence at its threshold)",
            "description": (
                "synthetic-01/T5's runs fell below the tier's reference:\n"
                "its pass rate is 20% over its last 10 runs."
            ),
            "runbook_url": "file:///repo/docs/runbooks.md#runbook-tierdropped",
        },
        "startsAt": "2026-11-23T14:28:00.000Z",
        "endsAt": "2026-11-23T14:58:00.000Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        **alert_overrides,
    }
    return {
        "receiver": "example-webhook",
        "status": status,
        "alerts": [alert],
        "groupLabels": {
            "alertname": "TierDropped",
            "experiment": "synthetic-01",
            "tier": "T5",
        },
        "externalURL": "http://127.0.0.1:9093",
        "version": "4",
    }


def test_a_firing_notification_reads_as_a_block() -> None:
    text = format_notification(notification())
    lines = text.splitlines()
    assert "firing" in lines[0]
    assert "FIRING" in text
    for value in (
        "TierDropped",
        "synthetic-01",
        "T5",
        "page",
        "synthetic-01/T5 dropped (pass_rate evidence at its threshold)",
        "synthetic-01/T5's runs fell below the tier's reference:",
        "its pass rate is 20% over its last 10 runs.",
        "file:///repo/docs/runbooks.md#runbook-tierdropped",
        "2026-11-23T14:28:00.000Z",
    ):
        assert value in text, value
    for field in ("experiment", "tier", "severity", "summary", "description", "runbook_url"):
        assert any(line.strip().startswith(field) for line in lines), field
    assert "startsAt" in text
    assert "endsAt" not in text


def test_a_resolved_notification_says_so_and_when() -> None:
    text = format_notification(notification("resolved"))
    assert "resolved" in text.splitlines()[0]
    assert "RESOLVED" in text
    assert "2026-11-23T14:58:00.000Z" in text


def test_an_alert_shows_its_own_labels_and_dashes_for_missing_annotations() -> None:
    """EvalStreamDown has no experiment or tier but an instance; EvalEventsRejected a reason."""
    payload = notification(
        labels={"alertname": "EvalEventsRejected", "reason": "schema", "severity": "warning"},
        annotations={},
    )
    lines = format_notification(payload).splitlines()
    assert lines[1] == "FIRING  EvalEventsRejected"
    assert [line.split() for line in lines[2:4]] == [["severity", "warning"], ["reason", "schema"]]
    assert not any(line.split()[0] in ("experiment", "tier") for line in lines[1:])
    assert ["summary", "-"] in [line.split() for line in lines]
    down = notification(labels={"alertname": "EvalStreamDown", "instance": "127.0.0.1:6066"})
    assert "  instance     127.0.0.1:6066" in format_notification(down).splitlines()
    # Prometheus adds its external labels to every alert: the runbook base is in the link.
    based = notification(labels={"alertname": "TierDropped", "runbook_base_url": "x"})
    assert "runbook_base_url" not in format_notification(based)


def post(url: str, body: bytes) -> int:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return cast(int, response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_receiver_prints_each_notification() -> None:
    out = io.StringIO()
    receiver = AlertReceiver(out=out).start()
    try:
        assert receiver.url.startswith("http://127.0.0.1:")
        assert post(receiver.url, json.dumps(notification()).encode()) == 200
        assert post(receiver.url, b"{not json") == 400
    finally:
        receiver.stop()
    assert "synthetic-01/T5 dropped (pass_rate evidence at its threshold)" in out.getvalue()
    assert receiver.notifications() == [notification()]


@pytest.mark.parametrize(
    "odd",
    [
        {"alerts": [1, 2]},
        {"alerts": "x"},
        {"alerts": [{"labels": "x", "annotations": [1], "status": 5}]},
        {"alerts": [{"labels": {"alertname": ["x"], "tier": None}}], "groupLabels": 3},
    ],
)
def test_receiver_survives_any_json_object(odd: dict[str, Any]) -> None:
    out = io.StringIO()
    receiver = AlertReceiver(out=out).start()
    try:
        assert post(receiver.url, json.dumps(odd).encode()) == 200
        assert post(receiver.url, json.dumps(notification()).encode()) == 200  # still serving
    finally:
        receiver.stop()
    assert "Alertmanager notification" in out.getvalue()
    assert "synthetic-01/T5 dropped (pass_rate evidence at its threshold)" in out.getvalue()


def test_control_characters_reach_the_terminal_escaped() -> None:
    """Labels come from events (an experiment id is any 1-200 characters): an escape sequence in
    one must not drive the on-call engineer's terminal."""
    evil = "exp\x1b]0;owned\x07\x1b[2J\r\nFIRING  Fake"
    payload = notification(
        labels={"alertname": "TierDropped", "experiment": evil, "tier": "T1\x9b31m"},
        annotations={"summary": "s\x1b[31m", "description": "two\nlines"},
    )
    text = format_notification(payload)
    assert not any(ch in text for ch in "\x1b\x07\r\x9b")
    assert "\\x1b" in text
    assert "FIRING  Fake" not in text.splitlines()
    assert "  description  two" in text.splitlines()  # a real newline in an annotation stays


def test_receiver_json_mode_prints_the_raw_body() -> None:
    out = io.StringIO()
    body = json.dumps(notification())
    receiver = AlertReceiver(out=out, raw_json=True).start()
    try:
        assert post(receiver.url, body.encode()) == 200
    finally:
        receiver.stop()
    assert out.getvalue() == body + "\n"


def test_parser_defaults_are_productions() -> None:
    command, args = parse(["observe"])
    assert command is observe.COMMAND
    assert (args.prometheus_port, args.alertmanager_port) == (9090, 9093)
    assert (args.scrape_interval, args.evaluation_interval, args.group_wait) == (
        "15s",
        "15s",
        "30s",
    )
    assert args.target is None  # then 127.0.0.1:<web_port from the settings>
    assert not args.json
    _, args = parse(["observe", "--target", "127.0.0.1:1", "--target", "127.0.0.1:2"])
    assert args.target == ["127.0.0.1:1", "127.0.0.1:2"]


def test_default_target_is_the_settings_web_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTREAM_WEB_PORT", "6111")
    monkeypatch.setenv("EVALSTREAM_TOOLS_DIR", "/opt/tools")
    run: list[ObserveConfig] = []

    def fake_run_observe(config: ObserveConfig, raw_json: bool) -> int:
        run.append(config)
        return 0

    monkeypatch.setattr(observe, "run_observe", fake_run_observe)
    assert main(["observe"]) == 0
    assert run[0].targets == ("127.0.0.1:6111",)
    assert run[0].tools_home == Path("/opt/tools/prometheus")


def test_a_missing_binary_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ObserveError) as caught:
        find_tool(("prometheus",), home=tmp_path / "none")
    assert "\n" not in str(caught.value)
    assert "scripts/install-prometheus.sh" in str(caught.value)

    monkeypatch.setenv("EVALSTREAM_TOOLS_DIR", str(tmp_path / "none"))
    assert main(["observe", "--target", "127.0.0.1:6066"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("stream-app observe: error: ")
    assert "Traceback" not in err


@pytest.mark.parametrize("port", ["0", "65536", "-1", "x"])
def test_a_listening_port_is_1_to_65535(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    for option in ("--prometheus-port", "--alertmanager-port"):
        with pytest.raises(SystemExit):
            parse(["observe", option, port])
    assert parse(["observe", "--webhook-port", "0"])[1].webhook_port == 0  # any


@pytest.mark.parametrize(
    "ports",
    [
        {"prometheus_port": 29090, "alertmanager_port": 29090},
        {"prometheus_port": 29090, "alertmanager_port": 29093, "webhook_port": 29090},
        {"prometheus_port": 29090, "alertmanager_port": 29093, "webhook_port": 29093},
    ],
)
def test_the_three_ports_must_differ(ports: dict[str, int], tmp_path: Path) -> None:
    """Checked before anything starts: one line, not Prometheus's log of a taken port."""
    stack = ObserveStack(config(**ports), out=io.StringIO())
    with pytest.raises(ObserveError, match="must differ"):
        stack.start()
    assert stack.workdir is None
