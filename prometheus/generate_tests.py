"""Generates prometheus/tests/scenarios.test.yml: promtool tests of the grade-drop alert whose input
series are the synthetic scenarios (stream_app/commands/synthetic.py) replayed through the core
and rendered by the worker's own exporter, sampled as Prometheus would scrape them.

- `stationary`: 1 hour of 21 noisy tiers at 1 run/s each: no page, at any evaluation.
- `drop`: 30 minutes, the drop injected into synthetic-01/T5 at 20:00: TierGradeDropped fires
  for that tier exactly when its first scrape shows it (no `for:`), well within 5 minutes, and
  nothing else pages.

Run `python prometheus/generate_tests.py` after changing the core, the exporter, the scenarios or
the rules; `--check` (in `make lint` and a test) fails while the committed file differs.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from stream_app.commands.synthetic import TIERS, GradeDrop, synthetic_lines
from stream_app.core.config import CoreConfig
from stream_app.core.replay import Replay
from stream_app.core.window import to_epoch_us
from stream_app.service.aggregate_collector import tier_lines

OUT = Path(__file__).parent / "tests" / "scenarios.test.yml"
START = datetime(2026, 1, 1, tzinfo=UTC)
SCRAPE_S = 15
EXPERIMENTS = 3
TIER_COUNT = EXPERIMENTS * len(TIERS)
GROUP_WAIT_S = 30  # prometheus/alertmanager.yml: a page reaches the receiver this much later
FAMILIES = (  # what the grade rules read; every other family is left out of the input
    "evalstream_tier_grade_points",
    "evalstream_tier_window_runs",
    "evalstream_tier_window_capacity",
    "evalstream_tier_grade_sustained_points",
    "evalstream_tier_grade_level_points",
    "evalstream_tier_grade_dropped",
)
LINE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>.*)\} (?P<value>\S+)$")
LETTERS = {4: "A", 3: "B", 2: "C", 1: "D", 0: "F"}
PAGES = (
    "group by (alertname, experiment, tier) "
    '(count_over_time(ALERTS{{severity="page",alertstate="firing"}}[{window}]))'
)


@dataclass
class Scraped:
    """Every input series of a scenario, one value (or None: absent) per scrape."""

    series: dict[str, list[str | None]]
    scrapes: int
    drop_seen_at_s: int | None  # the first scrape with the drop's tier dropped


def scrape(duration_s: int, drop: GradeDrop | None, seed: int) -> Scraped:
    """Replay the scenario through the core (`core.replay.Replay`, the worker's window fold) and
    render each tier's latest aggregate with the exporter, every SCRAPE_S of event time."""
    count = duration_s * TIER_COUNT  # one run a second per tier
    lines = synthetic_lines(
        count, experiments=EXPERIMENTS, seed=seed, start=START, tier_interval_s=1.0, drop=drop
    )
    replay = Replay(CoreConfig(), now_us=to_epoch_us(START + timedelta(days=1)))
    events = iter(enumerate(lines, start=1))
    pending: tuple[int, bytes] | None = None
    scrapes = duration_s // SCRAPE_S + 1
    series: dict[str, list[str | None]] = {}
    drop_seen: int | None = None
    for k in range(scrapes):
        now = START + timedelta(seconds=k * SCRAPE_S)
        while True:  # every run completed by this scrape has been processed
            pending = pending or next(events, None)
            if pending is None or _completed(pending[1]) > now:
                break
            replay.feed(pending[1], pending[0])
            pending = None
        for agg in replay.aggregates():
            for name, labels, value in _samples(agg):
                key = f'{name}{{job="evalstream",instance="worker-1:6066",{labels}}}'
                series.setdefault(key, [None] * scrapes)[k] = value
            mine = drop and (agg.experiment_id, agg.tier) == (drop.experiment, drop.tier)
            if mine and drop_seen is None and agg.grade_drop.dropped:
                drop_seen = k * SCRAPE_S
    series['up{job="evalstream",instance="worker-1:6066"}'] = ["1"] * scrapes  # the worker lives
    return Scraped(series, scrapes, drop_seen)


def _completed(line: bytes) -> datetime:
    return datetime.fromisoformat(json.loads(line)["completed_at"])


def _samples(agg: Any) -> Iterator[tuple[str, str, str]]:
    for family in tier_lines(agg):
        for line in family.splitlines():
            match = LINE.match(line)
            if match and match["name"] in FAMILIES:
                yield match["name"], match["labels"], match["value"]


def values(samples: list[str | None]) -> str:
    """In promtool's expanding notation: a run of one value `v` k times is `vx(k-1)`; absent `_`."""
    out: list[str] = []
    i = 0
    while i < len(samples):
        j = i
        while j + 1 < len(samples) and samples[j + 1] == samples[i]:
            j += 1
        text = "_" if samples[i] is None else str(samples[i])
        out.append(text if j == i else f"{text}x{j - i}")
        i = j + 1
    return " ".join(out)


def clock(seconds: int) -> str:
    """A promtool duration."""
    minutes, rest = divmod(seconds, 60)
    return f"{minutes}m{rest}s" if rest else f"{minutes}m"


def no_pages(at_s: list[int]) -> list[dict[str, Any]]:
    """No page-severity alert at any of these evaluation times."""
    return [
        {"eval_time": clock(t), "alertname": name, "exp_alerts": []}
        for t in at_s
        for name in ("TierGradeDropped", "TierGradeFailing")
    ]


def stationary_group() -> tuple[dict[str, Any], str]:
    """One hour of the stationary scenario: no page at any evaluation."""
    duration = 3600
    scraped = scrape(duration, None, seed=11)
    group = {
        "interval": f"{SCRAPE_S}s",
        "input_series": [{"series": s, "values": values(v)} for s, v in scraped.series.items()],
        "promql_expr_test": [
            {  # every tier has the signal for most of the hour (after its first 40 runs)
                "expr": "count(evalstream:tier_grade_level_points)",
                "eval_time": clock(duration),
                "exp_samples": [{"labels": "{}", "value": TIER_COUNT}],
            },
            {  # no tier was dropped at any scrape of the hour
                "expr": "sum(max_over_time(evalstream:tier_grade_dropped[1h]))",
                "eval_time": clock(duration),
                "exp_samples": [{"labels": "{}", "value": 0}],
            },
            {  # and no page fired at any evaluation (promtool keeps ALERTS like Prometheus)
                "expr": PAGES.format(window="1h"),
                "eval_time": clock(duration),
                "exp_samples": [],
            },
        ],
        "alert_rule_test": no_pages(list(range(0, duration + 1, 300))),
    }
    note = f"stationary: 1 hour, {TIER_COUNT} tiers at 1 run/s each ({duration * TIER_COUNT} runs)"
    return group, note


def drop_group() -> tuple[dict[str, Any], str]:
    """The drop scenario: the drop's tier pages when first seen dropped, and nothing else."""
    duration, begins = 1800, 1200
    drop = GradeDrop(experiment="synthetic-01", tier="T5", after=begins / duration)
    scraped = scrape(duration, drop, seed=12)
    seen = scraped.drop_seen_at_s
    if seen is None or seen - begins + GROUP_WAIT_S > 300:
        raise SystemExit(f"the drop was not flagged within 5 minutes (first seen at {seen} s)")
    level = _level_at(scraped, drop, seen)
    labels = 'experiment="synthetic-01",tier="T5"'
    firing = {
        "exp_labels": {"severity": "page", "experiment": "synthetic-01", "tier": "T5"},
        "exp_annotations": {
            "summary": f"synthetic-01/T5 dropped from {LETTERS[round(level)]} to F",
            "description": (
                "Every full 10-run window of synthetic-01/T5's last 30 runs graded F; "
                f"the tier usually grades {level:.1f} points (A=4 B=3 C=2 D=1 F=0). Window noise "
                "does not do this; a change in the agent, its model, its tools or the harness "
                "does."
            ),
            "runbook_url": "https://runbooks.example/evalstream#runbook-tiergradedropped",
        },
    }
    group = {
        "interval": f"{SCRAPE_S}s",
        "external_labels": {"runbook_base_url": "https://runbooks.example/evalstream"},
        "input_series": [{"series": s, "values": values(v)} for s, v in scraped.series.items()],
        "promql_expr_test": [
            {  # the drop's tier is the only one ever dropped
                "expr": "max_over_time(evalstream:tier_grade_dropped[30m]) == 1",
                "eval_time": clock(duration),
                "exp_samples": [{"labels": f"{{{labels}}}", "value": 1}],
            },
            {  # the only page of the half hour: that drop, firing at every evaluation since
                "expr": PAGES.format(window="30m"),
                "eval_time": clock(duration),
                "exp_samples": [
                    {
                        "labels": f'{{alertname="TierGradeDropped",{labels}}}',
                        "value": 1,
                    }
                ],
            },
        ],
        "alert_rule_test": [
            *no_pages([*range(0, seen, 300), seen - SCRAPE_S]),
            {"eval_time": clock(seen), "alertname": "TierGradeDropped", "exp_alerts": [firing]},
            {"eval_time": clock(duration), "alertname": "TierGradeDropped", "exp_alerts": [firing]},
        ],
    }
    after = seen - begins
    note = (
        f"drop: the drop began at {clock(begins)}; the worker flagged it {after} s later (first "
        f"scrape at {clock(seen)}); TierGradeDropped fires at that evaluation; with Alertmanager's "
        f"group_wait ({GROUP_WAIT_S} s) the page is sent {after + GROUP_WAIT_S} s after the drop "
        "began, at most one scrape and one evaluation interval (15 s each) later live"
    )
    return group, note


def _level_at(scraped: Scraped, drop: GradeDrop, at_s: int) -> float:
    key = next(
        s
        for s in scraped.series
        if s.startswith("evalstream_tier_grade_level_points{")
        and f'experiment="{drop.experiment}"' in s
        and f'tier="{drop.tier}"' in s
    )
    value = scraped.series[key][at_s // SCRAPE_S]
    assert value is not None
    return float(value)


def render() -> str:
    """The test file's text."""
    import yaml

    groups, notes = zip(stationary_group(), drop_group(), strict=True)
    head = "".join(f"# {note}\n" for note in notes)
    body = yaml.safe_dump(
        {
            "rule_files": ["../rules/evalstream.rules.yml"],
            "evaluation_interval": f"{SCRAPE_S}s",
            "tests": list(groups),
        },
        sort_keys=False,
        width=1_000_000,
    )
    return (
        "# Generated by prometheus/generate_tests.py from the synthetic scenarios replayed\n"
        "# through the core; do not edit. Run: promtool test rules prometheus/tests/*.test.yml\n"
        + head
        + body
    )


def main(argv: list[str]) -> int:
    """Write the file, or with `--check` say whether the committed one is current."""
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"stale {OUT.name}; run: python prometheus/generate_tests.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(text.split("rule_files")[0], end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
