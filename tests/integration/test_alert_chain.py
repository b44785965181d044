"""The whole alert chain, live: a worker on the embedded broker → Prometheus with the project's
rules → Alertmanager with the project's routes → the webhook receiver of `stream-app observe`.
The drop scenario (stationary noisy tiers, one sustained drop) must page exactly once, for the
dropped tier, with its labels and annotations; nothing else may page."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from harness import Worker, require_tansu, settings_for, wait_until
from helpers import prometheus_tool
from stream_app.commands.broker import EmbeddedBroker, free_port
from stream_app.commands.observe import ObserveConfig, ObserveStack, find_tools
from stream_app.commands.producer import produce
from stream_app.commands.synthetic import GradeDrop, synthetic_lines

pytestmark = pytest.mark.integration

RUNS_PER_TIER = 150  # 75 noisy runs (the level needs 40), then 75 of the drop (it needs ~35)
TIERS = 21
RATE = 120.0  # events a second: ~6 runs a second per tier, several scrapes per window
RUNBOOKS = "https://runbooks.example/evalstream/README.md"


def query(base: str, expr: str) -> list[Any]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    result: list[Any] = answer["data"]["result"]
    return result


def pages(notifications: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every firing page-severity alert in the notifications received."""
    return [
        alert
        for note in notifications
        for alert in note.get("alerts", [])
        if alert.get("status") == "firing" and alert["labels"].get("severity") == "page"
    ]


def test_the_drop_pages_through_alertmanager_and_nothing_else_does(
    broker: EmbeddedBroker, workers: list[Worker], tmp_path: Path
) -> None:
    require_tansu()
    prometheus_tool("prometheus")  # skip locally without the binaries; fail in CI
    prometheus_tool("prometheus-alertmanager")
    worker = Worker(broker, tmp_path, "chain").start()
    workers.append(worker)
    worker.wait_ready()

    printed = io.StringIO()
    config = ObserveConfig(
        targets=(f"127.0.0.1:{worker.port}",),
        prometheus_port=free_port(),
        alertmanager_port=free_port(),
        scrape_interval="1s",
        evaluation_interval="1s",
        group_wait="1s",
        group_interval="1s",
        runbook_base_url=RUNBOOKS,
    )
    with ObserveStack(config, out=printed, tools=find_tools()) as stack:
        wait_until(
            lambda: query(stack.prometheus_url, 'up{job="evalstream"} == 1'), 30, what="scrape"
        )
        lines = list(
            synthetic_lines(
                RUNS_PER_TIER * TIERS,
                experiments=3,
                seed=21,
                drop=GradeDrop(experiment="synthetic-01", tier="T5", after=0.5),
            )
        )
        producing = threading.Thread(
            target=lambda: asyncio.run(
                produce(settings_for(broker), lines, rate=RATE, progress=None)
            ),
            daemon=True,
        )
        began = time.monotonic()
        producing.start()
        drop_begins_s = len(lines) / 2 / RATE

        def paged() -> list[dict[str, Any]]:
            return pages(stack.receiver.notifications())

        alerts = wait_until(paged, 120, interval=0.5, what="a page at the webhook")
        paged_after_s = time.monotonic() - began - drop_begins_s
        producing.join(timeout=120)
        assert not producing.is_alive()
        # Everything produced is processed and evaluated: give the rules and Alertmanager time
        # to send anything else they would.
        wait_until(
            lambda: query(stack.prometheus_url, f"sum(evalstream:tier_window_full) == {TIERS}"),
            60,
            what="every tier's window full",
        )
        time.sleep(5)

        alerts = paged()
        assert {
            (a["labels"]["alertname"], a["labels"]["experiment"], a["labels"]["tier"])
            for a in alerts
        } == {("TierGradeDropped", "synthetic-01", "T5")}, printed.getvalue()
        page = alerts[0]
        assert page["labels"]["severity"] == "page"
        summary = page["annotations"]["summary"]
        assert summary.startswith("synthetic-01/T5 dropped from ")
        assert summary.endswith(" to F")
        assert summary.split()[3] in ("A", "B"), summary  # test-001's profile: usually A
        description = page["annotations"]["description"]
        assert "last 30 runs graded F; the tier usually grades" in description
        assert page["annotations"]["runbook_url"] == f"{RUNBOOKS}#runbook-tiergradedropped"
        # The receiver printed it as a block a person reads.
        text = printed.getvalue()
        assert "FIRING  TierGradeDropped" in text
        assert "synthetic-01/T5 dropped from" in text
        # Prometheus agrees: over the whole run, the only page that ever fired is that one.
        fired = query(
            stack.prometheus_url,
            "group by (alertname, experiment, tier) "
            '(count_over_time(ALERTS{severity="page",alertstate="firing"}[10m]))',
        )
        assert [r["metric"] for r in fired] == [
            {"alertname": "TierGradeDropped", "experiment": "synthetic-01", "tier": "T5"}
        ]
        print(
            f"paged {paged_after_s:.1f} s after the drop began (at {RATE / TIERS:.1f} runs/s/tier)"
        )
