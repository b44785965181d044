"""The observability kit, checked without a network: promtool and amtool on the rules and configs,
the generated dashboards current, and every cross-reference between the files resolved."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from stream_app.service.exporter import Exporter
from tests.helpers import REPO, prometheus_tool

RULES = REPO / "prometheus" / "rules" / "evalstream.rules.yml"
DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
ALERTS = {
    "TierDropped",
    "SuiteTierDropped",
    "TierRegressedVsBaseline",
    "EvalEventsRejected",
    "EvalStreamDown",
    "EvalStreamNoWorker",
    "EvalStreamStalled",
}


def run(*args: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def load_generator() -> Any:
    """grafana/generate.py, as a module."""
    path = "grafana/generate.py"
    spec = importlib.util.spec_from_file_location(path.replace("/", "_")[:-3], REPO / path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(RULES.read_text())["groups"]
    return groups


def recorded_names() -> set[str]:
    return {r["record"] for g in rule_groups() for r in g["rules"] if "record" in r}


def exported_names() -> set[str]:
    """Every sample name evalstream's /metrics can carry."""
    names = set()
    for family in Exporter("test").families():
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {f"{family.name}_bucket", f"{family.name}_count", f"{family.name}_sum"}
        else:
            names.add(family.name)
    return names


def dashboard_queries() -> list[str]:
    queries = []
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            queries += [t["expr"] for t in panel.get("targets", [])]
        queries += [a["expr"] for a in board["annotations"]["list"] if "expr" in a]
        queries += [
            v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"
        ]
    return queries


def test_promtool_check_config_and_rules() -> None:
    promtool = prometheus_tool("promtool")
    assert "SUCCESS" in run(promtool, "check", "config", "prometheus/prometheus.yml")
    assert "SUCCESS: 28 rules found" in run(promtool, "check", "rules", str(RULES))


def test_promtool_unit_tests_cover_every_alert() -> None:
    promtool = prometheus_tool("promtool")
    tests = sorted((REPO / "prometheus" / "tests").glob("*.yml"))
    assert "SUCCESS" in run(promtool, "test", "rules", *map(str, tests))
    firing: set[str] = set()
    silent: set[str] = set()
    for path in tests:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check["exp_alerts"] else silent).add(check["alertname"])
    assert firing == ALERTS, "every alert needs a case where it fires"
    assert silent == ALERTS, "every alert needs a case where it must not fire"


def test_alertmanager_config() -> None:
    assert "SUCCESS" in run(
        prometheus_tool("amtool"), "check-config", "prometheus/alertmanager.yml"
    )


def alert_names(matcher: str) -> set[str]:
    """The alerts of the rules an Alertmanager matcher on `alertname` selects."""
    match = re.fullmatch(r'alertname(=~?)"([^"]*)"', matcher)
    assert match, matcher
    op, value = match.groups()
    return {a for a in ALERTS if (re.fullmatch(value, a) if op == "=~" else a == value)}


def test_inhibit_rules() -> None:
    """While no worker is up, every tier alert and EvalStreamDown are held back; a tier that
    dropped holds back its own baseline warning (one incident, one alert), no other tier's; every
    name an inhibit rule gives is an alert of the rules."""
    config = yaml.safe_load((REPO / "prometheus" / "alertmanager.yml").read_text())
    rules = {}
    for rule in config["inhibit_rules"]:
        (source,) = rule["source_matchers"]
        (target,) = rule["target_matchers"]
        for alternative in re.findall(r'"([^"]*)"', target)[0].split("|"):
            assert alternative in ALERTS, f"{alternative!r} is not an alert of the rules"
        (name,) = alert_names(source)
        rules[name] = (alert_names(target), rule.get("equal"))
    tier_alerts = {a for a in ALERTS if a.startswith("Tier")}
    assert rules == {
        "EvalStreamNoWorker": (tier_alerts | {"EvalStreamDown"}, None),
        "TierDropped": ({"TierRegressedVsBaseline"}, ["experiment", "tier"]),
    }


def test_alerts_are_complete() -> None:
    alerts = [r for g in rule_groups() for r in g["rules"] if "alert" in r]
    assert {a["alert"] for a in alerts} == ALERTS
    runbooks = (REPO / "docs" / "runbooks.md").read_text()
    for alert in alerts:
        assert alert["labels"]["severity"] in ("page", "warning")
        assert set(alert["annotations"]) == {"summary", "description", "runbook_url"}
        base, anchor = alert["annotations"]["runbook_url"].split("#", 1)
        assert base == '{{ or $externalLabels.runbook_base_url "docs/runbooks.md" }}'
        assert anchor == f"runbook-{alert['alert'].lower()}"
        assert f'<a id="{anchor}"></a>' in runbooks, (
            f"docs/runbooks.md has no runbook for {alert['alert']}"
        )
        if alert["alert"].startswith("Tier"):
            assert (
                "{{ $labels.experiment }}"
                in alert["annotations"]["summary"] + alert["annotations"]["description"]
            )
            assert "{{ $labels.tier }}" in alert["annotations"]["summary"]


def test_dashboards_are_generated_and_current() -> None:
    generator = load_generator()
    assert generator.main(["--check"]) == 0, "run: python grafana/generate.py"
    assert [p.name for p in DASHBOARDS] == sorted(generator.render())


def _datasources(node: object) -> list[object]:
    """Every `datasource` a dashboard's JSON names, anywhere in it."""
    if isinstance(node, dict):
        found = [node["datasource"]] if "datasource" in node else []
        return found + [d for v in node.values() for d in _datasources(v)]
    if isinstance(node, list):
        return [d for v in node for d in _datasources(v)]
    return []


def test_dashboards_import_into_any_grafana() -> None:
    """What Grafana's dashboard linter checks (its template-datasource, panel-datasource and
    uneditable-dashboard rules): one datasource variable, `datasource` of type prometheus, that
    every panel, query, selector and annotation uses, no fixed datasource uid, and a dashboard
    that is not editable in the UI (it is generated). Its default is the provisioned source."""
    provisioned = yaml.safe_load(
        (REPO / "grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    uids = {d["uid"] for d in provisioned["datasources"]}
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        [variable] = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
        assert (variable["name"], variable["label"], variable["query"]) == (
            "datasource",
            "Data source",
            "prometheus",
        )
        assert variable["current"]["value"] in uids
        used = _datasources({k: v for k, v in board.items() if k != "templating"})
        used += _datasources([v for v in board["templating"]["list"] if v is not variable])
        assert len(used) > 50
        assert all(d == {"type": "prometheus", "uid": "${datasource}"} for d in used), {
            json.dumps(d) for d in used
        }
        panels = [p for p in board["panels"] if p["type"] != "row"]
        assert all(p.get("datasource") for p in panels)
        assert board["editable"] is False


def test_every_metric_a_query_names_exists() -> None:
    known = exported_names() | recorded_names() | {"up"}
    rule_exprs = [r["expr"] for g in rule_groups() for r in g["rules"]]
    for expr in dashboard_queries() + rule_exprs:
        for name in re.findall(r"\b(evalstream[a-zA-Z0-9_:]*|up)\b(?=\s*[{\[)\s,]|$)", expr):
            assert name in known, f"{name!r} in {expr!r} is neither exported nor recorded"


def test_dashboard_has_the_promised_panels() -> None:
    board = json.loads((REPO / "grafana/dashboards/evalstream-overview.json").read_text())
    titles = {p["title"] for p in board["panels"]}
    for title in [
        "Grade of $tier",
        "Median composite score per tier",
        "Pass rate (window mean)",
        "Median cost per run",
        "Cost of pass (median)",
        "Uplift vs baseline",
        "Cross-tier variance",
        "Cost delta across tiers",
        "pass@k",
        "Window fill",
        "Runs processed per second",
        "Rejected by reason",
        "Processing latency per event",
        "Run age at processing",
        "Consumer lag",
    ]:
        assert title in titles
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "experiment", "tier"]
    grade = next(p for p in board["panels"] if p["title"] == "Grade of $tier")
    assert grade["repeat"] == "tier"
    letters = grade["fieldConfig"]["defaults"]["mappings"][0]["options"]
    assert {k: v["text"] for k, v in letters.items()} == {
        "4": "A",
        "3": "B",
        "2": "C",
        "1": "D",
        "0": "F",
    }
    assert board["annotations"]["list"][0]["name"] == "Grade changes"


def test_compose_stack_is_wired() -> None:
    services = COMPOSE["services"]
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert "controller" in kafka["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft
    assert "--create" in services["kafka-init"]["command"][0]
    for name in ("worker-1", "worker-2"):
        worker = services[name]
        assert worker["build"] == "."
        assert worker["environment"]["EVALSTREAM_BROKER_URL"] == "kafka://kafka:9092"
        assert worker["environment"]["EVALSTREAM_WEB_BIND"] == "0.0.0.0"
    assert services["producer"]["profiles"] == ["demo"]
    grafana = services["grafana"]["environment"]
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD")
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    mounts = " ".join(services["grafana"]["volumes"] + services["prometheus"]["volumes"])
    for path in ("./grafana/provisioning", "./grafana/dashboards", "./prometheus"):
        assert path in mounts
        assert (REPO / path).is_dir()
    # Every host a config points at is a compose service.
    prometheus = yaml.safe_load((REPO / "prometheus/prometheus.yml").read_text())
    targets = [
        t
        for job in prometheus["scrape_configs"]
        if job["job_name"] == "evalstream"
        for c in job["static_configs"]
        for t in c["targets"]
    ]
    assert {t.split(":")[0] for t in targets} == {"worker-1", "worker-2"}
    am_targets = prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    alertmanager = yaml.safe_load((REPO / "prometheus/alertmanager.yml").read_text())
    webhook = alertmanager["receivers"][0]["webhook_configs"][0]["url"]
    datasource = yaml.safe_load(
        (REPO / "grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    hosts = (
        {t.split(":")[0] for t in am_targets}
        | {urlparse(webhook).hostname}
        | {urlparse(datasource["datasources"][0]["url"]).hostname}
    )
    assert hosts <= set(services), hosts - set(services)
    # Every topic evalstream uses exists before the workers start.
    created = re.findall(r"^\s*t (\S+)", services["kafka-init"]["command"][0], re.M)
    from stream_app.service.settings import load_settings
    from stream_app.service.topology import all_topics

    assert set(all_topics(load_settings())) <= set(created)


def test_worker_image_is_slim_non_root_and_health_checked() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in dockerfile
    assert re.search(r"^USER (?!root)\S+", dockerfile, re.M)
    assert "HEALTHCHECK" in dockerfile
    assert "/healthz" in dockerfile
    assert '"stream-app"' in dockerfile


@pytest.mark.parametrize(
    "path", ["prometheus/prometheus.yml", "prometheus/alertmanager.yml", "docker-compose.yml"]
)
def test_yaml_parses(path: str) -> None:
    assert yaml.safe_load((REPO / path).read_text())
