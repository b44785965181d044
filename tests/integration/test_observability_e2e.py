"""The observability kit against a real Prometheus scraping a live worker on the test broker,
with a drop injected by the synthetic producer: every dashboard and recording rule query runs
and returns series, and TierDropped fires for the dropped tier."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from stream_app.ports import free_port
from stream_app.processes import stop_process
from stream_app.synthetic import Drop, synthetic_lines
from tests.helpers import REPO, encode, make_event, prometheus_tool
from tests.integration.harness import Broker, Worker, produce_lines, settings_for, wait_until

RULES = REPO / "prometheus" / "rules" / "evalstream.rules.yml"
VARIABLES = {"$experiment": ".*", "$tier": ".*", "$__rate_interval": "30s", "$__interval": "5s"}


class Prometheus:
    def __init__(self, workdir: Path, worker_port: int) -> None:
        self.port = free_port()
        rules = yaml.safe_load(RULES.read_text())
        for group in rules["groups"]:
            group["interval"] = "1s"
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = "0s"  # the test's override of `for:` durations
        (workdir / "rules.yml").write_text(yaml.safe_dump(rules))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(workdir / "rules.yml")],
            "scrape_configs": [
                {
                    "job_name": "evalstream",
                    "static_configs": [{"targets": [f"127.0.0.1:{worker_port}"]}],
                }
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = (workdir / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                prometheus_tool("prometheus"),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return cast(int, r.status) == 200
        except OSError:
            return False

    def query(self, expr: str) -> list[Any]:
        answer = self.api("query", query=expr)
        assert answer["status"] == "success", (expr, answer)
        result: list[Any] = answer["data"]["result"]
        return result

    def stop(self) -> None:
        stop_process(self.process, timeout=30)
        self.log.close()


@pytest.fixture
def prometheus_for(tmp_path: Path) -> Iterator[Any]:
    started: list[Prometheus] = []

    def start(worker_port: int) -> Prometheus:
        p = Prometheus(tmp_path, worker_port)
        started.append(p)
        wait_until(p.ready, 60, what="Prometheus ready")
        return p

    yield start
    for p in started:
        p.stop()


def all_queries() -> list[str]:
    queries = []
    for path in sorted((REPO / "grafana" / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            queries += [t["expr"] for t in panel.get("targets", [])]
        queries += [a["expr"] for a in board["annotations"]["list"]]
        for var in (v for v in board["templating"]["list"] if v["type"] == "query"):
            inner = re.fullmatch(r"label_values\((.*), *\w+\)", var["query"]["query"])
            assert inner, var
            queries.append(inner.group(1))
    rules = yaml.safe_load(RULES.read_text())
    queries += [r["expr"] for g in rules["groups"] for r in g["rules"] if "record" in r]
    out = []
    for query in queries:
        expanded = query
        for name, value in VARIABLES.items():
            expanded = expanded.replace(name, value)
        out.append(expanded)
    return out


def test_dashboards_and_alerts_against_live_prometheus(
    broker: Broker, workers: list[Worker], tmp_path: Path, prometheus_for: Any
) -> None:
    worker = Worker(broker, tmp_path, "demo").start()
    workers.append(worker)
    worker.wait_ready()
    prometheus = prometheus_for(worker.port)
    settings = settings_for(broker)
    # 120 runs of each tier: the drop's tier has 60 before its drop (the detectors' warm-up:
    # 50 reference runs, each joining once it has left the 10-run window) and pages within the
    # 60 after.
    lines = list(
        synthetic_lines(
            2520, experiments=3, seed=5, drop=Drop(experiment="synthetic-01", tier="T5")
        )
    )
    bad = [b"{not json", encode(make_event(run_id="x", passed="yes"))]
    produce_lines(settings, lines[:300] + bad + lines[300:] + lines[:50], rate=150)

    def firing() -> list[Any]:
        alerts = prometheus.api("alerts")["data"]["alerts"]
        return [
            a
            for a in alerts
            if a["labels"]["alertname"] == "TierDropped" and a["state"] == "firing"
        ]

    alerts = wait_until(firing, 90, interval=1, what="TierDropped firing")
    drop = [
        a
        for a in alerts
        if a["labels"]["experiment"] == "synthetic-01" and a["labels"]["tier"] == "T5"
    ]
    assert drop == alerts, alerts  # no other tier dropped
    assert drop[0]["labels"]["severity"] == "page"
    # The summary names the detectors whose evidence is at its threshold when the rule is
    # evaluated; evidence that eased since the page (a passing run or two before the next
    # scrape) leaves the tier dropped and the summary without them (promtool tests both forms).
    assert re.fullmatch(
        r"synthetic-01/T5 dropped( \((pass_rate|score|pass_rate and score) evidence at its"
        r" threshold\))?",
        drop[0]["annotations"]["summary"],
    ), drop[0]["annotations"]
    assert drop[0]["annotations"]["description"].startswith(
        "synthetic-01/T5's runs fell below the tier's reference"
    ), drop[0]["annotations"]
    # The series the summary's template asks for are there, one per detector.
    evidence = prometheus.query(
        'evalstream_tier_drop_evidence_ratio{experiment="synthetic-01",tier="T5"}'
    )
    assert sorted(e["metric"]["detector"] for e in evidence) == ["pass_rate", "score"], evidence
    assert drop[0]["annotations"]["runbook_url"] == "docs/runbooks.md#runbook-tierdropped"
    wait_until(lambda: prometheus.query("evalstream:consumer_lag_messages"), 30, what="lag gauge")

    empty = []
    for expr in all_queries():
        if not prometheus.query(expr):
            empty.append(expr)
    assert not empty, f"queries without data: {empty}"
    # The target is up and the stall alert stays quiet while the worker keeps up.
    assert prometheus.query('up{job="evalstream"} == 1')
    stalled = [
        a
        for a in prometheus.api("alerts")["data"]["alerts"]
        if a["labels"]["alertname"] == "EvalStreamStalled"
    ]
    assert not stalled
