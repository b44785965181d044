"""The whole alert chain, live: a worker on the test broker → Prometheus with the project's
rules → Alertmanager with the project's routes → the webhook receiver of `stream-app observe`.
The drop scenario (stationary noisy tiers, one sustained drop) must page exactly once, for the
dropped tier, with its labels and annotations; nothing else may page, and the dropped tier's
baseline warning, if it fires, is held back by its page."""

from __future__ import annotations

import asyncio
import io
import json
import re
import threading
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stream_app.observe.config import ObserveConfig
from stream_app.observe.stack import ObserveStack
from stream_app.observe.tools import find_tools
from stream_app.ports import free_port
from stream_app.service.settings import Settings
from stream_app.sources.producer import produce
from stream_app.synthetic import Drop, synthetic_lines
from tests.helpers import prometheus_tool
from tests.integration.harness import (
    Broker,
    Worker,
    outputs_equal_replay,
    post_alerts,
    settings_for,
    wait_until,
)

RUNS_PER_TIER = 150  # 75 runs before the drop (the detectors watch from the 51st), 75 after
# (the default collapse pages within ~10-20 of them)
TIERS = 21
RATE = 120.0  # events a second: ~6 runs a second per tier, several scrapes per window
RUNBOOKS = "https://runbooks.example/evalstream/docs/runbooks.md"


def query(base: str, expr: str) -> list[Any]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    result: list[Any] = answer["data"]["result"]
    return result


def api(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def seconds(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339).timestamp()


def scraped_after(prometheus: str, moment: float) -> float | None:
    """When the worker's latest scrape began, if after `moment`."""
    targets = api(f"{prometheus}/api/v1/targets?state=active")["data"]["activeTargets"]
    [began] = [seconds(t["lastScrape"]) for t in targets if t["labels"]["job"] == "evalstream"]
    return began if began > moment else None


def evaluated_after(prometheus: str, moment: float) -> bool:
    groups = api(f"{prometheus}/api/v1/rules")["data"]["groups"]
    return bool(groups) and all(seconds(g["lastEvaluation"]) > moment for g in groups)


def alertmanager_holds_what_fires(stack: ObserveStack) -> bool:
    """Alertmanager has every alert firing in Prometheus (with its labels; its own copy also
    has the external ones), held back or not."""
    firing = [
        a["labels"]
        for a in api(f"{stack.prometheus_url}/api/v1/alerts")["data"]["alerts"]
        if a["state"] == "firing"
    ]
    held = [a["labels"] for a in api(f"{stack.alertmanager_url}/api/v2/alerts")]
    return all(any(labels.items() <= h.items() for h in held) for labels in firing)


SENTINEL = "AlertChainSentinel"


def post_sentinel(alertmanager: str) -> None:
    """An alert of its own group that no inhibit rule holds back, posted to Alertmanager."""
    labels = {"alertname": SENTINEL, "severity": "info"}
    post_alerts(alertmanager, [{"labels": labels, "startsAt": datetime.now(UTC).isoformat()}])


def wait_until_everything_sent(stack: ObserveStack, settings: Settings, lines: list[bytes]) -> None:
    """Wait, step by step, until whatever the chain would send of these runs has been sent. The
    worker has processed every run (its gauges are set as it publishes); Prometheus has stored
    a scrape begun after that (a scrape starts only once the one before is stored) and
    evaluated every rule on it (the alerts read raw series: one evaluation); Alertmanager holds
    every alert that fires. Then a sentinel goes through Alertmanager to the receiver. A group
    of alerts Alertmanager already holds goes out before it: a new group one group_wait after
    its first alert came, an alert added to a group sent already at the group's next
    group_interval, and both are 1 s, the sentinel's group_wait (the test's config). An alert
    it holds back is never sent."""
    wait_until(lambda: outputs_equal_replay(settings, lines), 90, what="every run processed")
    done = time.time()
    prometheus = stack.prometheus_url
    wait_until(
        lambda: query(prometheus, f"sum(evalstream:tier_window_full) == {TIERS}"),
        60,
        what="every tier's window full",
    )
    scraped = wait_until(lambda: scraped_after(prometheus, done), 30, what="a scrape")
    stored = wait_until(lambda: scraped_after(prometheus, scraped), 30, what="the next scrape")
    wait_until(
        lambda: evaluated_after(prometheus, stored),
        30,
        what="every rule group evaluated on the final samples",
    )
    wait_until(
        lambda: alertmanager_holds_what_fires(stack), 30, what="Alertmanager holding every alert"
    )
    post_sentinel(stack.alertmanager_url)
    wait_until(
        lambda: any(
            a["labels"].get("alertname") == SENTINEL
            for note in stack.receiver.notifications()
            for a in note.get("alerts", [])
        ),
        30,
        what="the sentinel at the webhook",
    )


def pages(notifications: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every firing page-severity alert in the notifications received."""
    return [
        alert
        for note in notifications
        for alert in note.get("alerts", [])
        if alert.get("status") == "firing" and alert["labels"].get("severity") == "page"
    ]


def test_the_drop_pages_through_alertmanager_and_nothing_else_does(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
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
                drop=Drop(experiment="synthetic-01", tier="T5", after=0.5),
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
        # Nothing else pages, nor is the warning sent: absence, asserted once whatever would be
        # sent has been (a sentinel after it is at the webhook).
        wait_until_everything_sent(stack, settings_for(broker), lines)

        alerts = paged()
        assert {
            (a["labels"]["alertname"], a["labels"]["experiment"], a["labels"]["tier"])
            for a in alerts
        } == {("TierDropped", "synthetic-01", "T5")}, printed.getvalue()
        page = alerts[0]
        assert page["labels"]["severity"] == "page"
        summary = page["annotations"]["summary"]
        # The detector at its threshold (the collapse is in both pass rate and scores: either
        # may); or none, when a passing run eased the evidence just below it as the rule was
        # evaluated (the subtests' references are young at the page): the description says so.
        named = re.fullmatch(
            r"synthetic-01/T5 dropped( \((pass_rate|score|pass_rate and score) evidence at its "
            r"threshold\))?",
            summary,
        )
        assert named, summary
        description = page["annotations"]["description"]
        assert (named.group(1) is None) == ("has eased since" in description), description
        assert description.startswith("synthetic-01/T5's runs fell below the tier's reference")
        assert re.search(
            r"Its pass rate is [0-9.]+% over its last 10 runs and [0-9.]+% over all ", description
        ), description
        assert page["annotations"]["runbook_url"] == f"{RUNBOOKS}#runbook-tierdropped"
        # The receiver printed it as a block a person reads.
        text = printed.getvalue()
        assert "FIRING  TierDropped" in text
        assert re.search(r"summary +" + re.escape(summary.split("\n")[0]), text), text
        # Prometheus agrees: over the whole run, the only page that ever fired is that one.
        fired = query(
            stack.prometheus_url,
            "group by (alertname, experiment, tier) "
            '(count_over_time(ALERTS{severity="page",alertstate="firing"}[10m]))',
        )
        assert [r["metric"] for r in fired] == [
            {"alertname": "TierDropped", "experiment": "synthetic-01", "tier": "T5"}
        ]
        # The dropped tier's cumulative pass rate may fall wholly below the baseline's by the
        # end (a warning, for that tier only); its page holds the warning back (alertmanager.yml).
        warned = query(
            stack.prometheus_url,
            "group by (experiment, tier) (count_over_time("
            'ALERTS{alertname="TierRegressedVsBaseline",alertstate="firing"}[10m]))',
        )
        assert [r["metric"] for r in warned] in ([], [{"experiment": "synthetic-01", "tier": "T5"}])
        assert not [
            alert
            for note in stack.receiver.notifications()
            for alert in note.get("alerts", [])
            if alert["labels"].get("alertname") == "TierRegressedVsBaseline"
        ], printed.getvalue()
        print(f"baseline warning fired in Prometheus: {bool(warned)} (held back)")
        print(
            f"paged {paged_after_s:.1f} s after the drop began (at {RATE / TIERS:.1f} runs/s/tier)"
        )
