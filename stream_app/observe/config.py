"""What `stream-app observe` runs and the configs it writes: production's rules and routing
(prometheus/), pointed at local workers, our Alertmanager and our webhook receiver."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from stream_app.observe import LOOPBACK

RUNBOOK_LABEL: Final = "runbook_base_url"
"""The external label the alerts' runbook links start with (prometheus/rules)."""


def repository_root() -> Path:
    """The checkout holding prometheus/: this package's, or else the working directory (an
    installed package has no rules beside it)."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "prometheus" / "rules").is_dir() else Path.cwd()


@dataclass(frozen=True)
class ObserveConfig:
    """What to run: ports, targets and the intervals (production's by default; tests shorten
    them). `group_interval` None keeps prometheus/alertmanager.yml's; `tools_home` None looks
    for the binaries under the `tools_dir` setting."""

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
    tools_home: Path | None = None

    @property
    def runbooks(self) -> str:
        """The runbook base: the option, or this checkout's docs/runbooks.md as a file:// URL."""
        return self.runbook_base_url or (self.repo / "docs" / "runbooks.md").resolve().as_uri()

    def rule_files(self) -> list[str]:
        """prometheus/prometheus.yml's rule_files, resolved against prometheus/ as Prometheus
        would: the rules are read where they are, never copied."""
        base = self.repo / "prometheus"
        patterns = ["rules/*.yml"]
        production = base / "prometheus.yml"
        if production.is_file():
            patterns = yaml.safe_load(production.read_text()).get("rule_files") or patterns
        return [str(base / p) if not Path(p).is_absolute() else p for p in patterns]


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
