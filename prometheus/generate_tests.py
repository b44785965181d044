"""Generates prometheus/tests/scenarios.test.yml: promtool tests of the drop alert (and of the
baseline warning) whose input series are the synthetic scenarios (stream_app/synthetic.py)
replayed through the core and rendered by the worker's own exporter, sampled as Prometheus would
scrape them.

- `spread`: 1 hour of 21 stationary tiers at pass rates 5-95 %, 1 run/s each: TierDropped never
  fires, at any evaluation; TierRegressedVsBaseline (a warning) fires for exactly the tiers whose
  pass rate is below their baseline's, from the first scrape whose interval shows it.
- `drop`, `fall-to-30`, `score-drop`: 20 minutes, a drop injected into one tier at 10:00 (the
  named scenario's collapse to 15 % passes; a fall from 85 % to 30 % passes, scores untouched;
  judge scores only, pass rate unchanged): TierDropped fires for that tier exactly when its first
  scrape shows it dropped (no `for:`), well within 5 minutes, and no page fires for anything else.
- `suite-drop`: 3½ hours of a suite of 12 experiments (one run a minute each, T1), every one of
  them regressing at 2:00 (odds of passing x 0.33): SuiteTierDropped fires when the first
  scrape shows the suite dropped and keeps firing to the end (one alert, however the running
  hour dips below the threshold), and no tier pages.

Each group's input series are only those the alert rules read: `evalstream_tier_dropped` of every
tier and `up`, and for the tier an alert is expected for, the series its annotations read.
The generator itself checks what promtool cannot see: the replay pages exactly once per drop (for
its tier) and never otherwise, and the stationary tiers are watched for most of the hour.

Run `python prometheus/generate_tests.py` after changing the core, the exporter, the scenarios or
the rules; `--check` (in `make lint`) fails while the committed file differs from what they
render (`fingerprint`: its first line spares the check the replay when nothing changed).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

from stream_app.core.config import CoreConfig
from stream_app.core.replay import Page, Replay
from stream_app.core.window import to_epoch_us
from stream_app.metrics.cross_tier import cross_tier_report
from stream_app.service.aggregate_collector import experiment_lines, tier_lines
from stream_app.service.exporter import SuiteCollector
from stream_app.synthetic import SPREAD, TIERS, Drop, Profile, scenario, synthetic_lines

OUT = Path(__file__).parent / "tests" / "scenarios.test.yml"
INPUTS = "# inputs: sha256 "  # the first line: `fingerprint()`
START = datetime(2026, 1, 1, tzinfo=UTC)
SCRAPE_S = 15
EXPERIMENTS = 3
TIER_COUNT = EXPERIMENTS * len(TIERS)
GROUP_WAIT_S = 30  # prometheus/alertmanager.yml: a page reaches the receiver this much later
INSTANCE = 'job="evalstream",instance="worker-1:6066"'
DETECTORS = ("pass_rate", "score")
LINE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>.*)\} (?P<value>\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
PAGES = (
    "group by (alertname, experiment, tier) "
    '(count_over_time(ALERTS{{severity="page",alertstate="firing"}}[{window}]))'
)
WARNINGS = (
    "group by (alertname, experiment, tier) "
    '(count_over_time(ALERTS{{severity="warning",alertstate="firing"}}[{window}]))'
)
RUNBOOKS = "https://runbooks.example/evalstream"
Keep = Callable[[str, dict[str, str]], bool]
"""Which sample of the exporter's goes into the input series: (name, labels) -> keep it."""


@dataclass
class Scraped:
    """Every input series of a scenario, one value (or None: absent) per scrape, and what the
    replay saw."""

    series: dict[str, list[str | None]]
    scrapes: int
    pages: list[Page]
    highest_ratio: float  # the highest evidence ratio of any tier at any scrape
    watched_at_s: int | None  # the first scrape at which every tier's detectors run
    dropped_at_s: int | None  # the first scrape that shows the drop's tier dropped

    def value(self, name: str, labels: str, at_s: int) -> float | None:
        """A series' value at a scrape (None: absent)."""
        value = self.series.get(_key(name, labels), [None] * self.scrapes)[at_s // SCRAPE_S]
        return None if value is None else float(value)


def _key(name: str, labels: str) -> str:
    """A series' name and labels, the labels in name order (however they were written)."""
    pairs = sorted(LABEL.findall(f"{INSTANCE},{labels}"))
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def _tier_labels(experiment: str, tier: str) -> str:
    return f'experiment="{experiment}",tier="{tier}"'


def scrape(
    duration_s: int,
    profiles: tuple[Profile, ...],
    drop: Drop | None,
    *,
    seed: int,
    keep: Keep,
    cross_tier: bool = False,
) -> Scraped:
    """Replay the scenario through the core (`core.replay.Replay`, the worker's window fold) and
    render each tier's latest aggregate (and with `cross_tier` each experiment's report) with the
    exporter, every SCRAPE_S of event time; keep the samples `keep` says."""
    count = duration_s * TIER_COUNT  # one run a second per tier
    lines = synthetic_lines(
        count,
        experiments=EXPERIMENTS,
        seed=seed,
        start=START,
        tier_interval_s=1.0,
        drop=drop,
        profiles=profiles,
    )
    config = CoreConfig()
    crossing = (config.baseline_tier, config.interval_confidence)
    replay = Replay(config, now_us=to_epoch_us(START + timedelta(days=1)))
    events = iter(enumerate(lines, start=1))
    pending: tuple[int, bytes] | None = None
    scrapes = duration_s // SCRAPE_S + 1
    series: dict[str, list[str | None]] = {}
    highest, watched, dropped = 0.0, None, None

    def add(rendered: tuple[str, ...], k: int) -> None:
        for family in rendered:
            for line in family.splitlines():
                match = LINE.match(line)
                if match and keep(match["name"], dict(LABEL.findall(match["labels"]))):
                    key = _key(match["name"], match["labels"])
                    series.setdefault(key, [None] * scrapes)[k] = match["value"]

    for k in range(scrapes):
        now = START + timedelta(seconds=k * SCRAPE_S)
        while True:  # every run completed by this scrape has been processed
            pending = pending or next(events, None)
            if pending is None or _completed(pending[1]) > now:
                break
            replay.feed(pending[1], pending[0])
            pending = None
        tiers = replay.aggregates()  # folds the pending runs
        for agg in tiers:
            add(tier_lines(agg), k)
            highest = max(highest, *agg.drop.evidence.values(), 0.0)
            mine = drop and (agg.experiment_id, agg.tier) == (drop.experiment, drop.tier)
            if mine and dropped is None and agg.drop.dropped:
                dropped = k * SCRAPE_S
        every = len(tiers) == TIER_COUNT and all(agg.drop.monitoring for agg in tiers)
        if watched is None and every:
            watched = k * SCRAPE_S
        if cross_tier:  # each experiment's report, as the worker's cross-tier stage makes it
            for experiment in sorted({agg.experiment_id for agg in tiers}):
                its = {agg.tier: agg for agg in tiers if agg.experiment_id == experiment}
                add(experiment_lines(cross_tier_report(experiment, its, *crossing)), k)
    series[f"up{{{INSTANCE}}}"] = ["1"] * scrapes  # the worker lives
    return Scraped(series, scrapes, list(replay.pages), highest, watched, dropped)


def _completed(line: bytes) -> datetime:
    return datetime.fromisoformat(json.loads(line)["completed_at"])


def values(samples: list[str | None]) -> str:
    """In promtool's expanding notation: a run of one value `v` k times is `vx(k-1)`, but of k
    absent samples `_xk` (promtool counts them so)."""
    out: list[str] = []
    i = 0
    while i < len(samples):
        j = i
        while j + 1 < len(samples) and samples[j + 1] == samples[i]:
            j += 1
        if samples[i] is None:
            out.append("_" if j == i else f"_x{j - i + 1}")
        else:
            out.append(f"{samples[i]}" if j == i else f"{samples[i]}x{j - i}")
        i = j + 1
    return " ".join(out)


def expand(notation: str) -> list[str | None]:
    """`values`' text read back as promtool reads it (for the forms `values` writes)."""
    out: list[str | None] = []
    for token in notation.split():
        value, _, times = token.partition("x")
        if value == "_":
            out += [None] * (int(times) if times else 1)
        else:
            out += [value] * (int(times) + 1 if times else 1)
    return out


def input_series(scraped: Scraped) -> list[dict[str, str]]:
    """The group's input series, each checked to read back as scraped."""
    out = []
    for series, samples in scraped.series.items():
        text = values(samples)
        assert expand(text) == samples, series
        out.append({"series": series, "values": text})
    return out


def clock(seconds: int) -> str:
    """A promtool duration."""
    minutes, rest = divmod(seconds, 60)
    return f"{minutes}m{rest}s" if rest else f"{minutes}m"


def percentage(value: float | None) -> str:
    """Prometheus' humanizePercentage (Go's %.4g of the value times 100)."""
    return "unknown" if value is None else f"{value * 100:.4g}%"


def no_pages(at_s: list[int]) -> list[dict[str, Any]]:
    """TierDropped silent at each of these evaluation times."""
    return [{"eval_time": clock(t), "alertname": "TierDropped", "exp_alerts": []} for t in at_s]


def at_threshold(
    scraped: Scraped, ratio: str, labels: str, at_s: int, eased: str
) -> tuple[str, str]:
    """The detectors whose evidence `ratio` series is at 1 at `at_s` as an alert's annotations
    name them ("" for none), and the description's words for it (`eased` for none)."""
    at = [
        d for d in DETECTORS if (scraped.value(ratio, f'{labels},detector="{d}"', at_s) or 0.0) >= 1
    ]
    which = " and ".join(at)
    if not at:
        return which, eased
    plural = "s" if len(at) > 1 else ""
    return which, f"the evidence of its {which} detector{plural} is at the threshold"


def dropped_alert(scraped: Scraped, experiment: str, tier: str, at_s: int) -> dict[str, Any]:
    """TierDropped for the tier as its annotations read the input series at `at_s`."""
    labels = _tier_labels(experiment, tier)
    at, evidence = at_threshold(
        scraped,
        "evalstream_tier_drop_evidence_ratio",
        labels,
        at_s,
        "a detector's evidence reached the threshold and has eased since, but the runs are "
        "not back at the reference",
    )
    window = scraped.value("evalstream_tier_window_runs", labels, at_s)
    runs = scraped.value("evalstream_tier_cumulative_runs", labels, at_s)
    rate = scraped.value("evalstream_tier_pass_rate", f'{labels},stat="mean"', at_s)
    total = scraped.value(
        "evalstream_tier_cumulative_pass_rate", f'{labels},bound="estimate"', at_s
    )
    description = (
        f"{experiment}/{tier}'s runs fell below the tier's reference (its own earlier runs): "
        f"{evidence}. Its pass rate is {percentage(rate)} over its last "
        f"{'' if window is None else f'{window:.0f}'} runs and {percentage(total)} over all its "
        f"{'' if runs is None else f'{runs:.0f}'} runs. Noise alone pages a tier at most once "
        "per drop_false_page_runs runs (a million by default); a change in the agent, its model, "
        "its tools or the harness does this."
    )
    return {
        "exp_labels": {"severity": "page", "experiment": experiment, "tier": tier},
        "exp_annotations": {
            "summary": f"{experiment}/{tier} dropped"
            + (f" ({at} evidence at its threshold)" if at else ""),
            "description": description,
            "runbook_url": f"{RUNBOOKS}#runbook-tierdropped",
        },
    }


def regressed_alert(scraped: Scraped, experiment: str, tier: str, at_s: int) -> dict[str, Any]:
    """TierRegressedVsBaseline for the tier as its annotations read the input series at `at_s`."""
    labels = _tier_labels(experiment, tier)
    estimate = scraped.value(
        "evalstream_tier_pass_rate_difference", f'{labels},bound="estimate"', at_s
    )
    high = scraped.value("evalstream_tier_pass_rate_difference", f'{labels},bound="high"', at_s)
    return {
        "exp_labels": {"severity": "warning", "experiment": experiment, "tier": tier},
        "exp_annotations": {
            "summary": f"{experiment}/{tier} passes less often than the baseline",
            "description": (
                f"{experiment}/{tier}'s pass rate over all its runs minus the baseline tier's is "
                f"{'below 0' if estimate is None else percentage(estimate)}, and its interval "
                f"lies wholly below 0 (its upper end is {percentage(high)}): with the "
                "confidence interval_confidence (95 % by default) for all of the experiment's "
                "tiers at once, at any time, this tier passes less often than the baseline."
            ),
            "runbook_url": f"{RUNBOOKS}#runbook-tierregressedvsbaseline",
        },
    }


def _below_baseline(profiles: tuple[Profile, ...]) -> list[tuple[str, str]]:
    """The tiers whose pass rate is below their experiment's baseline (T0) tier's."""
    return [
        (f"synthetic-{e + 1:02d}", tier)
        for e in range(EXPERIMENTS)
        for level, tier in enumerate(TIERS)
        if (rates := profiles[e % len(profiles)].pass_rates)[level] < rates[0]
    ]


def spread_group() -> tuple[dict[str, Any], str]:
    """One hour of stationary tiers at 5-95 %: no page at any evaluation; the baseline warning
    for exactly the tiers below their baseline."""
    duration = 3600
    below = _below_baseline(SPREAD)

    def keep(name: str, labels: dict[str, str]) -> bool:
        if name == "evalstream_tier_dropped":
            return True
        if name == "evalstream_tier_pass_rate_difference":  # the baseline warning's input
            mine = (labels["experiment"], labels["tier"]) in below
            return labels["bound"] == "high" or (mine and labels["bound"] == "estimate")
        return False

    scraped = scrape(duration, SPREAD, None, seed=11, keep=keep, cross_tier=True)
    if scraped.pages:
        raise SystemExit(f"stationary tiers paged: {scraped.pages}")
    watched = scraped.watched_at_s
    if watched is None or watched > 120:
        raise SystemExit(f"the stationary tiers were not all watched within 2 minutes: {watched}")
    below_at: dict[tuple[str, str], list[bool]] = {}  # the warning's condition at each scrape
    for key, samples in scraped.series.items():
        if key.startswith("evalstream_tier_pass_rate_difference{") and 'bound="high"' in key:
            labels = dict(LABEL.findall(key))
            if any(v is not None and float(v) < 0 for v in samples):
                below_at[(labels["experiment"], labels["tier"])] = [
                    v is not None and float(v) < 0 for v in samples
                ]
    if sorted(below_at) != sorted(below):
        raise SystemExit(f"the baseline warning would fire for {sorted(below_at)}, not {below}")
    changes = {  # the scrapes at which each tier's warning starts or stops
        tier: [k * SCRAPE_S for k in range(scraped.scrapes) if flags[k] != (k > 0 and flags[k - 1])]
        for tier, flags in below_at.items()
    }
    checks = sorted({t for ts in changes.values() for t in ts for t in (t - SCRAPE_S, t)})
    group = {
        "interval": f"{SCRAPE_S}s",
        "external_labels": {"runbook_base_url": RUNBOOKS},
        "input_series": input_series(scraped),
        "promql_expr_test": [
            {  # every tier reports all hour
                "expr": "count(evalstream:tier_dropped)",
                "eval_time": clock(duration),
                "exp_samples": [{"labels": "{}", "value": TIER_COUNT}],
            },
            {  # no tier was dropped at any scrape of the hour
                "expr": "sum(max_over_time(evalstream:tier_dropped[1h]))",
                "eval_time": clock(duration),
                "exp_samples": [{"labels": "{}", "value": 0}],
            },
            {  # and no page fired at any evaluation (promtool keeps ALERTS like Prometheus)
                "expr": PAGES.format(window="1h"),
                "eval_time": clock(duration),
                "exp_samples": [],
            },
            {  # the only warnings of the hour: the tiers below their baseline
                "expr": WARNINGS.format(window="1h"),
                "eval_time": clock(duration),
                "exp_samples": [
                    {
                        "labels": '{alertname="TierRegressedVsBaseline",'
                        f"{_tier_labels(experiment, tier)}}}",
                        "value": 1,
                    }
                    for experiment, tier in sorted(below)
                ],
            },
        ],
        "alert_rule_test": [
            *no_pages(list(range(0, duration + 1, 300))),
            *(
                {
                    "eval_time": clock(t),
                    "alertname": "TierRegressedVsBaseline",
                    "exp_alerts": [
                        regressed_alert(scraped, e, tier, t)
                        for (e, tier), flags in sorted(below_at.items())
                        if flags[t // SCRAPE_S]
                    ],
                }
                for t in [*checks, duration]
            ),
        ],
    }
    warned = ", ".join(
        f"{e}/{tier} ({percentage(_rate(SPREAD, e, tier))} against "
        f"{percentage(_rate(SPREAD, e, 'T0'))}) from {clock(ts[0])}"
        + "".join(
            f"{' (' if i == 1 else ', '}{'off' if i % 2 else 'on again'} at {clock(t)}"
            for i, t in enumerate(ts[1:], start=1)
        )
        + (")" if len(ts) > 1 else "")
        for (e, tier), ts in sorted(changes.items())
    )
    note = (
        f"spread: 1 hour, {TIER_COUNT} stationary tiers at pass rates 5-95 % at 1 run/s each "
        f"({duration * TIER_COUNT} runs), every tier's detectors running from {clock(watched)}: "
        f"no page at any evaluation (the highest evidence ratio of any tier: "
        f"{scraped.highest_ratio:.3f}, 1 pages); TierRegressedVsBaseline (warning) fires for "
        f"{warned}, and for no other tier"
    )
    return group, note


def _profile(profiles: tuple[Profile, ...], experiment: str) -> Profile:
    """The profile synthetic_events gives experiment `synthetic-NN`."""
    return profiles[(int(experiment[-2:]) - 1) % len(profiles)]


def _rate(profiles: tuple[Profile, ...], experiment: str, tier: str) -> float:
    return _profile(profiles, experiment).pass_rates[TIERS.index(tier)]


def drop_group(
    name: str, profiles: tuple[Profile, ...], drop: Drop, what: str, *, seed: int
) -> tuple[dict[str, Any], str]:
    """A drop at 10:00 of 20 minutes (600 runs of each tier before it, 600 after): the drop's
    tier pages when first seen dropped, and nothing else pages."""
    duration, begins = 1200, 600
    drop = replace(drop, after=begins / duration)
    experiment, tier = drop.experiment, drop.tier
    labels = _tier_labels(experiment, tier)

    def keep(family: str, sample: dict[str, str]) -> bool:
        if family == "evalstream_tier_dropped":
            return True
        if (sample["experiment"], sample["tier"]) != (experiment, tier):
            return False
        return (  # what TierDropped's annotations read
            family
            in (
                "evalstream_tier_drop_evidence_ratio",
                "evalstream_tier_window_runs",
                "evalstream_tier_cumulative_runs",
            )
            or (family == "evalstream_tier_pass_rate" and sample["stat"] == "mean")
            or (family == "evalstream_tier_cumulative_pass_rate" and sample["bound"] == "estimate")
        )

    scraped = scrape(duration, profiles, drop, seed=seed, keep=keep)
    pages = scraped.pages
    if [(p.experiment_id, p.tier) for p in pages] != [(experiment, tier)]:
        raise SystemExit(f"{name}: the replay paged {pages}, not once for {experiment}/{tier}")
    seen = scraped.dropped_at_s
    if seen is None or seen - begins + GROUP_WAIT_S > 300:
        raise SystemExit(
            f"{name}: the drop was not flagged within 5 minutes (first seen at {seen})"
        )
    flags = scraped.series[_key("evalstream_tier_dropped", labels)][seen // SCRAPE_S :]
    if set(flags) != {"1.0"}:
        raise SystemExit(f"{name}: {experiment}/{tier} did not stay dropped to the end")
    page = pages[0]
    first_dropped = math.ceil(drop.after * (duration * TIER_COUNT))  # as synthetic_events counts
    offset = next(i for i in range(first_dropped, first_dropped + TIER_COUNT) if _is(i, drop))
    runs = (page.line - 1 - offset) // TIER_COUNT + 1  # the drop's runs of the tier, the page's too
    paged_s = (page.line - 1) / TIER_COUNT - begins  # event time of the paging run
    group = {
        "interval": f"{SCRAPE_S}s",
        "external_labels": {"runbook_base_url": RUNBOOKS},
        "input_series": input_series(scraped),
        "promql_expr_test": [
            {  # the drop's tier is the only one ever dropped
                "expr": "max_over_time(evalstream:tier_dropped[20m]) == 1",
                "eval_time": clock(duration),
                "exp_samples": [{"labels": f"{{{labels}}}", "value": 1}],
            },
            {  # the only page of the 20 minutes: that drop, firing at every evaluation since
                "expr": PAGES.format(window="20m"),
                "eval_time": clock(duration),
                "exp_samples": [{"labels": f'{{alertname="TierDropped",{labels}}}', "value": 1}],
            },
        ],
        "alert_rule_test": [
            *no_pages([*range(0, seen, 300), seen - SCRAPE_S]),
            *(
                {
                    "eval_time": clock(t),
                    "alertname": "TierDropped",
                    "exp_alerts": [dropped_alert(scraped, experiment, tier, t)],
                }
                for t in (seen, duration)
            ),
        ],
    }
    after = seen - begins
    note = (
        f"{name}: {what} in {experiment}/{tier} from {clock(begins)}; its {page.detector} "
        f"detector paged on the drop's run {runs} ({paged_s:.1f} s after it began); the first "
        f"scrape showing it is {after} s after the drop began ({clock(seen)}), and TierDropped "
        f"fires at that evaluation; with Alertmanager's group_wait ({GROUP_WAIT_S} s) the page "
        f"is sent {after + GROUP_WAIT_S} s after the drop began, at most one scrape and one "
        "evaluation interval (15 s each) later live"
    )
    return group, note


def _is(i: int, drop: Drop) -> bool:
    """Whether the stream's run i is of the drop's tier."""
    position = i % TIER_COUNT
    return (f"synthetic-{position // len(TIERS) + 1:02d}", TIERS[position % len(TIERS)]) == (
        drop.experiment,
        drop.tier,
    )


SUITE = "agent-nightly"
SUITE_EXPERIMENTS = 12


def suite_lines(seed: int, duration_s: int, begins_s: int) -> list[bytes]:
    """A suite of SUITE_EXPERIMENTS experiments, tier T1, one run a minute each (a second
    apart), base pass rates Beta(7, 3); from `begins_s` every one regresses (odds x 0.33)."""
    import random

    rnd = random.Random(seed)
    rates = [rnd.betavariate(7, 3) for _ in range(SUITE_EXPERIMENTS)]
    out = []
    for minute in range(duration_s // 60):
        for e, base in enumerate(rates):
            at = START + timedelta(seconds=60 * minute + e)
            p = base if 60 * minute < begins_s else base * 0.33 / (1 - base + base * 0.33)
            passed = rnd.random() < p
            score = min(1.0, max(0.0, rnd.gauss(0.9, 0.05) if passed else rnd.gauss(0.35, 0.15)))
            event = {
                "schema_version": 1,
                "run_id": f"suite-{e:02d}/T1/{minute:05d}",
                "experiment_id": f"suite-{e:02d}",
                "tier": "T1",
                "model": "claude-haiku-4-5",
                "suite": SUITE,
                "subtest": "00",
                "passed": passed,
                "judgment": {"summary": {"weighted_score": round(score, 4)}},
                "tokens": {"input": 10, "output": 100, "cache_creation": 0, "cache_read": 0},
                "cost_usd": 0.01,
                "started_at": (at - timedelta(seconds=20)).isoformat(),
                "completed_at": at.isoformat(),
            }
            out.append(json.dumps(event).encode())
    return out


def suite_scrape(duration_s: int, begins_s: int, *, seed: int) -> tuple[Scraped, int | None]:
    """The suite replayed through the core; at every scrape, the suite tier's gauges as the
    worker's exporter renders them and every tier's `evalstream_tier_dropped`. Also the first
    scrape that shows the suite dropped."""
    from prometheus_client import CollectorRegistry, generate_latest

    replay = Replay(CoreConfig(), now_us=to_epoch_us(START + timedelta(days=1)))
    events = iter(enumerate(suite_lines(seed, duration_s, begins_s), start=1))
    pending: tuple[int, bytes] | None = None
    scrapes = duration_s // SCRAPE_S + 1
    series: dict[str, list[str | None]] = {}
    dropped_at: int | None = None
    for k in range(scrapes):
        now = START + timedelta(seconds=k * SCRAPE_S)
        while True:
            pending = pending or next(events, None)
            if pending is None or _completed(pending[1]) > now:
                break
            replay.feed(pending[1], pending[0])
            pending = None
        tiers = replay.aggregates()  # folds the pending runs, their suites' too
        collector = SuiteCollector()
        for report in replay.suite_tiers():
            collector.suites[(report.suite, report.tier)] = _suite_entry(report)
            if dropped_at is None and report.drop.dropped:
                dropped_at = k * SCRAPE_S
        registry = CollectorRegistry()
        registry.register(collector)
        rendered = [generate_latest(registry).decode()]
        rendered += [
            line for agg in tiers for line in tier_lines(agg) if "evalstream_tier_dropped{" in line
        ]
        for family in rendered:
            for line in family.splitlines():
                match = LINE.match(line)
                if match:
                    key = _key(match["name"], match["labels"])
                    series.setdefault(key, [None] * scrapes)[k] = match["value"]
    series[f"up{{{INSTANCE}}}"] = ["1"] * scrapes
    return Scraped(series, scrapes, list(replay.pages), 0.0, None, None), dropped_at


def _suite_entry(report: Any) -> Any:
    from stream_app.service.exporter import SuiteEntry

    return SuiteEntry(report, report.model_dump_json().encode())


def suite_alert(scraped: Scraped, at_s: int) -> dict[str, Any]:
    """SuiteTierDropped for the suite's T1 as its annotations read the input series at `at_s`."""
    labels = f'suite="{SUITE}",tier="T1"'
    at, evidence = at_threshold(
        scraped,
        "evalstream_suite_drop_evidence_ratio",
        labels,
        at_s,
        "a detector reached its threshold within its windows and has eased since",
    )
    experiments = scraped.value("evalstream_suite_experiments", labels, at_s)
    runs = scraped.value("evalstream_suite_runs", labels, at_s)
    return {
        "exp_labels": {"severity": "page", "suite": SUITE, "tier": "T1"},
        "exp_annotations": {
            "summary": f"suite {SUITE} dropped at T1"
            + (f" ({at} evidence at its threshold)" if at else ""),
            "description": (
                f"The runs of suite {SUITE} at tier T1, over its {experiments:.0f} experiments "
                f"({runs:.0f} runs counted), fell together, each run against its own subtest's "
                f"history: {evidence}. Noise alone paged no suite in the simulated harness "
                "traffic (docs/statistics.md); a change of the agent itself, its model or its "
                "prompt, does this."
            ),
            "runbook_url": f"{RUNBOOKS}#runbook-suitetierdropped",
        },
    }


def suite_group() -> tuple[dict[str, Any], str]:
    """3½ hours of a suite regressing at 2:00: SuiteTierDropped fires at the first scrape that
    shows it dropped, and nothing else pages."""
    duration, begins = 12_600, 7_200
    scraped, seen = suite_scrape(duration, begins, seed=20)
    pages = scraped.pages
    if [(p.scope, p.suite, p.tier) for p in pages] != [("suite", SUITE, "T1")]:
        raise SystemExit(f"suite-drop: the replay paged {pages}, not once for {SUITE}/T1")
    if seen is None or seen - begins > 2 * 3600:
        raise SystemExit(f"suite-drop: the suite was not flagged within 2 hours ({seen})")
    labels = f'suite="{SUITE}",tier="T1"'
    flags = scraped.series[_key("evalstream_suite_dropped", labels)][seen // SCRAPE_S :]
    if (
        flags[-1] != "1.0"
        or any(  # a dip in the running hour: keep_firing_for holds the alert
            all(f == "0.0" for f in flags[k : k + 3600 // SCRAPE_S]) for k in range(len(flags))
        )
    ):
        raise SystemExit("suite-drop: the suite tier was not dropped to the end")
    dips = [seen + k * SCRAPE_S for k, f in enumerate(flags) if f == "0.0"]
    lit = [seen + k * SCRAPE_S for k, f in enumerate(flags) if f == "1.0"]
    page = pages[0]
    run_minute = (page.line - 1) // SUITE_EXPERIMENTS
    group = {
        "interval": f"{SCRAPE_S}s",
        "external_labels": {"runbook_base_url": RUNBOOKS},
        "input_series": input_series(scraped),
        "promql_expr_test": [
            {  # the suite tier is the only one ever dropped, and the only page
                "expr": (
                    "max by (suite, tier) (max_over_time(evalstream_suite_dropped[3h30m])) == 1"
                ),
                "eval_time": clock(duration),
                "exp_samples": [{"labels": f"{{{labels}}}", "value": 1}],
            },
            {
                "expr": (
                    "group by (alertname, suite, tier) "
                    '(count_over_time(ALERTS{severity="page",alertstate="firing"}[3h30m]))'
                ),
                "eval_time": clock(duration),
                "exp_samples": [
                    {"labels": f'{{alertname="SuiteTierDropped",{labels}}}', "value": 1}
                ],
            },
        ],
        "alert_rule_test": [
            *(
                {"eval_time": clock(t), "alertname": "SuiteTierDropped", "exp_alerts": []}
                for t in (*range(0, seen, 1800), seen - SCRAPE_S)
            ),
            *no_pages([*range(0, duration + 1, 1800)]),
            *(
                {  # kept firing through a dip, an alert keeps the annotations it last had
                    "eval_time": clock(t),
                    "alertname": "SuiteTierDropped",
                    "exp_alerts": [suite_alert(scraped, max(d for d in lit if d <= t))],
                }
                for t in (seen, *dips, *range(seen + 900 - seen % 900, duration, 900), duration)
            ),
        ],
    }
    note = (
        f"suite-drop: {SUITE_EXPERIMENTS} experiments of suite {SUITE} (T1, a run a minute each) "
        f"regress together from {clock(begins)} (odds x 0.33); the suite's {page.detector} "
        f"detector paged on the run of minute {run_minute} ({run_minute * 60 - begins} s after "
        f"the regression began); the first scrape showing it is at {clock(seen)}, and "
        f"SuiteTierDropped fires at that evaluation and keeps firing to the end, across the "
        f"{len(dips)} scrape(s) at which the running hour dipped below the threshold again; "
        f"no tier paged"
    )
    return group, note


def render() -> str:
    """The test file's text."""
    import yaml

    profiles, drop = scenario("drop", "T5")
    _, score_drop = scenario("score-drop", "T5")
    assert drop is not None
    assert score_drop is not None
    assert drop.pass_rate is not None
    assert drop.passed_score is not None
    assert score_drop.passed_score is not None
    fall = Drop("synthetic-03", "T2", pass_rate=0.30, passed_score=None, failed_score=None)
    own = _rate(profiles, drop.experiment, drop.tier)
    groups, notes = zip(
        spread_group(),
        drop_group(
            "drop",
            profiles,
            drop,
            f"a collapse from {percentage(own)} to {percentage(drop.pass_rate)} passes, judge "
            f"scores ~{drop.passed_score[0]}",
            seed=12,
        ),
        drop_group(
            "fall-to-30",
            SPREAD,
            fall,
            f"a fall from {percentage(_rate(SPREAD, fall.experiment, fall.tier))} to "
            f"{percentage(fall.pass_rate)} passes, judge scores untouched",
            seed=13,
        ),
        drop_group(
            "score-drop",
            profiles,
            score_drop,
            f"passed runs' judge scores from ~{_profile(profiles, drop.experiment).passed_score[0]}"
            f" to ~{score_drop.passed_score[0]}, pass rate unchanged ({percentage(own)})",
            seed=14,
        ),
        suite_group(),
        strict=True,
    )
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


RENDERED_BY = ("prometheus-client", "pydantic", "pydantic-core", "pyyaml")
"""The dependencies whose versions can change the text: the exporter's, the models', the YAML's."""


def fingerprint(text: str) -> str:
    """The file's first line: the digest of what it is made from (this generator, the package's
    and the schemas' modules, pyproject.toml, Python's version and those of `RENDERED_BY`) and
    of the text made. The rendering replays 150,000 runs, half a minute of CPU in every `make
    lint`; a file made from these very inputs, and not edited since, is current without it."""
    repo = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in [Path(__file__).resolve(), repo / "pyproject.toml",
                 *sorted((repo / "stream_app").rglob("*.py")),
                 *sorted((repo / "schemas").rglob("*.py"))]:  # fmt: skip
        digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    versions = [f"python {sys.version_info[0]}.{sys.version_info[1]}"]
    versions += [f"{name} {metadata.version(name)}" for name in RENDERED_BY]
    digest.update("\n".join(versions).encode())
    made = hashlib.sha256(text.encode()).hexdigest()
    return f"{INPUTS}{digest.hexdigest()} made {made}\n"


def main(argv: list[str]) -> int:
    """Write the file, or with `--check` say whether the committed one is current: its first
    line vouches for it, or else its text is what the inputs render."""
    old = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
    first, _, body = old.partition("\n")
    if "--check" in argv:
        if first + "\n" == fingerprint(body) or body == render():
            return 0
        print(f"stale {OUT.name}; run: python prometheus/generate_tests.py", file=sys.stderr)
        return 1
    text = render()
    OUT.write_text(fingerprint(text) + text, encoding="utf-8")
    print(text.split("rule_files")[0], end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
