"""Generates grafana/dashboards/*.json. Run `python grafana/generate.py` after editing; a test fails
while the committed JSON differs from what this produces.

Plain dictionaries in Grafana's dashboard JSON model (schema 38, Grafana 10/11); every query
goes through the recording rules of prometheus/rules/ or plain evalstream metrics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DATASOURCE_UID = "evalstream-prometheus"
DS = {"type": "prometheus", "uid": DATASOURCE_UID}
OUT = Path(__file__).parent / "dashboards"
SEL = 'experiment=~"$experiment", tier=~"$tier"'
EXP = 'experiment=~"$experiment"'
DROPPED = "evalstream:tier_dropped == 1"
DROP_STATE = (
    # 0 warming up, 1 watching (the detectors' evidence exists), 2 or 3 dropped.
    f"(2 * evalstream:tier_dropped{{{SEL}}} + on (experiment, tier) "
    f"(count by (experiment, tier) (evalstream:tier_drop_evidence_ratio{{{SEL}}}) > bool 0)) "
    f"or on (experiment, tier) (2 * evalstream:tier_dropped{{{SEL}}})"
)


def difference(bound: str) -> str:
    """A bound of the selected tiers' pass-rate difference from the baseline, one per tier."""
    return (
        "max by (experiment, tier) "
        f'(evalstream:tier_pass_rate_difference{{{SEL}, bound="{bound}"}})'
    )


GRADE_MAPPINGS = [
    {
        "type": "value",
        "options": {
            "4": {"text": "A", "color": "green", "index": 0},
            "3": {"text": "B", "color": "#73BF69", "index": 1},
            "2": {"text": "C", "color": "yellow", "index": 2},
            "1": {"text": "D", "color": "orange", "index": 3},
            "0": {"text": "F", "color": "red", "index": 4},
        },
    }
]
DROP_STATES = [
    # The "Drop detectors" state: 2 x dropped + 1 once the detectors run (their evidence exists).
    {
        "type": "value",
        "options": {
            "0": {"text": "warming up", "color": "blue", "index": 0},
            "1": {"text": "watching", "color": "green", "index": 1},
            "2": {"text": "DROPPED", "color": "red", "index": 2},
            "3": {"text": "DROPPED", "color": "red", "index": 3},
        },
    }
]
SIGNIFICANCE = [
    {
        "type": "value",
        "options": {
            "1": {"text": "higher", "color": "green", "index": 0},
            "0": {"text": "not significant", "color": "text", "index": 1},
            "-1": {"text": "lower", "color": "red", "index": 2},
        },
    }
]
INTERVALS = (
    "Intervals are anytime-valid confidence sequences at interval_confidence (95 %): they hold "
    "however often they are looked at"
)
NEVER_PASSES = [
    # Prometheus sends +Inf when no run of the window passed.
    {
        "type": "range",
        "options": {
            "from": 1e300,
            "to": None,
            "result": {"text": "never passes", "color": "red", "index": 0},
        },
    },
    {
        "type": "regex",
        "options": {
            "pattern": r"^\+?Inf(inity)?$",
            "result": {"text": "never passes", "color": "red", "index": 1},
        },
    },
]


class Layout:
    """Places panels left to right, 24 columns wide."""

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.row_height = 0
        self.next_id = 1

    def place(self, width: int, height: int) -> dict[str, int]:
        if self.x + width > 24:
            self.x, self.y = 0, self.y + self.row_height
            self.row_height = 0
        pos = {"x": self.x, "y": self.y, "w": width, "h": height}
        self.x += width
        self.row_height = max(self.row_height, height)
        return pos

    def new_row(self) -> dict[str, int]:
        if self.x:
            self.x, self.y = 0, self.y + self.row_height
        pos = {"x": 0, "y": self.y, "w": 24, "h": 1}
        self.y += 1
        self.row_height = 0
        return pos

    def id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def target(expr: str, legend: str = "", ref: str = "A") -> dict[str, Any]:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, "range": True}


def row(layout: Layout, title: str, repeat: str | None = None) -> dict[str, Any]:
    """A row; with `repeat`, Grafana draws it and its panels once per value of that variable."""
    result: dict[str, Any] = {
        "type": "row",
        "id": layout.id(),
        "title": title,
        "collapsed": False,
        "gridPos": layout.new_row(),
        "panels": [],
    }
    if repeat:
        result["repeat"] = repeat
    return result


def panel(
    layout: Layout,
    kind: str,
    title: str,
    description: str,
    targets: list[dict[str, Any]],
    *,
    width: int = 12,
    height: int = 8,
    unit: str = "short",
    mappings: list[dict[str, Any]] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    thresholds: list[dict[str, Any]] | None = None,
    options: dict[str, Any] | None = None,
    custom: dict[str, Any] | None = None,
    field: dict[str, Any] | None = None,
    overrides: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": unit, "mappings": mappings or [], **(field or {})}
    if custom:
        defaults["custom"] = custom
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    defaults["thresholds"] = {
        "mode": "absolute",
        "steps": thresholds or [{"color": "green", "value": None}],
    }
    result: dict[str, Any] = {
        "type": kind,
        "id": layout.id(),
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": layout.place(width, height),
        "targets": [{**t, "refId": chr(ord("A") + i)} for i, t in enumerate(targets)],
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": options or {},
    }
    result.update(extra or {})
    return result


def variable(name: str, label: str, query: str, include_all: bool = True) -> dict[str, Any]:
    """A query variable. Without "All" it starts at the first value: the experiment selector,
    since a deployment holds thousands of experiments and "All" would draw every one."""
    current: dict[str, Any] = (
        {"selected": True, "text": ["All"], "value": ["$__all"]} if include_all else {}
    )
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": f"{name}-values"},
        "definition": query,
        "refresh": 2,
        "includeAll": include_all,
        "multi": True,
        "allValue": ".*",
        "current": current,
        "sort": 3,
    }


def band(name: str, colour: str) -> list[dict[str, Any]]:
    """Overrides that draw the `low` and `high` series of a `{{bound}}` legend as a shaded band
    around `estimate` (renamed `name`), all in `colour`."""
    fixed = {"id": "color", "value": {"mode": "fixed", "fixedColor": colour}}

    def series(bound: str, *properties: dict[str, Any]) -> dict[str, Any]:
        return {"matcher": {"id": "byName", "options": bound}, "properties": [fixed, *properties]}

    return [
        series(
            "estimate", {"id": "displayName", "value": name}, {"id": "custom.lineWidth", "value": 2}
        ),
        series(
            "high",
            {"id": "custom.fillBelowTo", "value": "low"},
            {"id": "custom.fillOpacity", "value": 20},
            {"id": "custom.lineWidth", "value": 0},
        ),
        series("low", {"id": "custom.lineWidth", "value": 0}),
    ]


def instant_table(expr: str) -> dict[str, Any]:
    """A table query: one row per series, its last value."""
    return {**target(expr), "format": "table", "instant": True, "range": False}


def merged_table(columns: dict[str, str], hidden: tuple[str, ...] = ()) -> dict[str, Any]:
    """Transformations that join the instant table queries A, B, … on their labels into one row
    per series, their values renamed by `columns` (refId -> column name), `hidden` ones left out."""
    return {
        "transformations": [
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True, **{f"Value #{r}": True for r in hidden}},
                    "renameByName": {f"Value #{r}": name for r, name in columns.items()},
                },
            },
        ]
    }


def overview() -> dict[str, Any]:
    lay = Layout()
    legend = "{{experiment}} {{tier}}"
    grade_steps: list[dict[str, Any]] = [
        {"color": "red", "value": None},
        {"color": "orange", "value": 0.65},
        {"color": "yellow", "value": 0.75},
        {"color": "#73BF69", "value": 0.85},
        {"color": "green", "value": 0.95},
    ]
    timeseries_opts = {
        "legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull"]}
    }
    panels = [
        row(lay, "Across all experiments"),
        panel(
            lay,
            "table",
            "Lowest full-window grades",
            "The 10 tiers with the lowest grade on a full window, over every experiment (not only "
            "the selected ones): where to look first among thousands.",
            [
                {
                    **target(
                        "bottomk(10, evalstream:tier_grade_points:full)", "{{experiment}} {{tier}}"
                    ),
                    "format": "table",
                    "instant": True,
                    "range": False,
                }
            ],
            width=9,
            height=7,
            mappings=GRADE_MAPPINGS,
            options={"showHeader": True, "sortBy": [{"displayName": "Value", "desc": False}]},
            extra={
                "transformations": [
                    {
                        "id": "organize",
                        "options": {
                            "excludeByName": {"Time": True},
                            "renameByName": {"Value": "grade"},
                        },
                    }
                ]
            },
        ),
        panel(
            lay,
            "table",
            "Dropped tiers",
            "Every tier whose drop detectors paged and whose runs are not back at its reference "
            "(what TierDropped pages on), over every experiment: its pass rate over its window "
            "and over all its runs. Empty is good.",
            [
                instant_table(DROPPED),
                instant_table(
                    f"evalstream:tier_pass_rate_mean and on (experiment, tier) ({DROPPED})"
                ),
                instant_table(
                    "max by (experiment, tier) "
                    '(evalstream:tier_cumulative_pass_rate{bound="estimate"}) '
                    f"and on (experiment, tier) ({DROPPED})"
                ),
                instant_table(
                    "max by (experiment, tier) (evalstream_tier_cumulative_runs) "
                    f"and on (experiment, tier) ({DROPPED})"
                ),
            ],
            width=9,
            height=7,
            unit="percentunit",
            field={"noValue": "no tier dropped"},
            overrides=[
                {
                    "matcher": {"id": "byName", "options": "runs"},
                    "properties": [{"id": "unit", "value": "short"}],
                }
            ],
            options={"showHeader": True},
            extra=merged_table(
                {"B": "pass rate, window", "C": "pass rate, all runs", "D": "runs"},
                hidden=("A",),
            ),
        ),
        panel(
            lay,
            "stat",
            "Experiments and tiers",
            "Experiments with a window on some worker, and the tiers with a gauge; both fall as "
            "idle experiments retire (experiment_idle_ttl_s).",
            [
                target("sum(evalstream_experiments)", "experiments"),
                target("count(evalstream:tier_grade_points)", "tiers", ref="B"),
                target(
                    "sum(increase(evalstream_experiments_retired_total[1d]))",
                    "retired in 1d",
                    ref="C",
                ),
                target("sum(evalstream:tier_dropped)", "dropped tiers", ref="D"),
            ],
            width=6,
            height=7,
            options={
                "colorMode": "none",
                "graphMode": "area",
                "textMode": "value_and_name",
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            },
        ),
        row(lay, "Grades"),
        panel(
            lay,
            "stat",
            "Grade of $tier",
            "Letter grade of the median composite score of each experiment's 10-run window of this tier.",
            [target(f"evalstream:tier_grade_points{{{SEL}}}", "{{experiment}}")],
            width=6,
            height=5,
            mappings=GRADE_MAPPINGS,
            thresholds=[
                {"color": "red", "value": None},
                {"color": "orange", "value": 1},
                {"color": "yellow", "value": 2},
                {"color": "#73BF69", "value": 3},
                {"color": "green", "value": 4},
            ],
            options={
                "colorMode": "background",
                "graphMode": "none",
                "textMode": "value_and_name",
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            },
            extra={"repeat": "tier", "repeatDirection": "h", "maxPerRow": 6},
        ),
        row(lay, "Drop detectors and differences from the baseline"),
        panel(
            lay,
            "state-timeline",
            "Drop detectors",
            "Per tier: warming up (its detectors still learn its reference from its first "
            "drop_warmup_runs runs), watching, or DROPPED (a detector paged and the runs are not "
            "back at the reference: TierDropped). Noise alone pages a tier at most once per "
            "drop_false_page_runs runs.",
            [target(DROP_STATE, legend)],
            mappings=DROP_STATES,
            options={
                "showValue": "auto",
                "mergeValues": True,
                "rowHeight": 0.85,
                "legend": {"showLegend": False},
            },
        ),
        panel(
            lay,
            "table",
            "Pass rate vs baseline (all runs)",
            "Each tier's pass rate over all its runs minus the baseline tier's, with its interval, "
            f"in percentage points. {INTERVALS}, and all of an experiment's intervals hold at "
            "once; 'not significant' when the interval holds 0.",
            [
                instant_table(difference("estimate")),
                instant_table(difference("low")),
                instant_table(difference("high")),
                instant_table(f"({difference('low')} > bool 0) - ({difference('high')} < bool 0)"),
            ],
            unit="percentunit",
            field={"decimals": 1, "noValue": "no baseline run yet"},
            overrides=[
                {
                    "matcher": {"id": "byName", "options": "significant"},
                    "properties": [
                        {"id": "unit", "value": "short"},
                        {"id": "mappings", "value": SIGNIFICANCE},
                        {"id": "custom.cellOptions", "value": {"type": "color-text"}},
                    ],
                }
            ],
            options={"showHeader": True, "sortBy": [{"displayName": "estimate", "desc": False}]},
            extra=merged_table({"A": "estimate", "B": "low", "C": "high", "D": "significant"}),
        ),
        row(lay, "$experiment: drop evidence and intervals per tier", repeat="experiment"),
        panel(
            lay,
            "timeseries",
            "Drop evidence · $tier",
            "Each drop detector's evidence of a fall below the tier's reference, as a fraction of "
            "its threshold on a log scale: 1 (the dashed line) pages. The pass_rate detector "
            "watches passes, the score detector the judge scores. Absent while it warms up.",
            [target(f"evalstream:tier_drop_evidence_ratio{{{SEL}}}", "{{detector}}")],
            width=24,
            height=6,
            unit="none",
            minimum=0,
            thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}],
            field={"decimals": 2},
            custom={"thresholdsStyle": {"mode": "dashed"}, "axisSoftMax": 1.2},
            options=timeseries_opts,
            extra={"repeat": "tier", "repeatDirection": "h", "maxPerRow": 4},
        ),
        panel(
            lay,
            "timeseries",
            "Pass rate over all runs · $tier",
            f"The tier's pass rate over every run since its first, and its interval (the band). "
            f"{INTERVALS}.",
            [target(f"evalstream:tier_cumulative_pass_rate{{{SEL}}}", "{{bound}}")],
            width=24,
            height=6,
            unit="percentunit",
            minimum=0,
            maximum=1,
            overrides=band("pass rate", "blue"),
            options=timeseries_opts,
            extra={"repeat": "tier", "repeatDirection": "h", "maxPerRow": 4},
        ),
        panel(
            lay,
            "timeseries",
            "Pass rate vs baseline · $tier",
            "The tier's pass rate over all its runs minus the baseline tier's, in percentage "
            f"points, and its interval (the band); significant while the band excludes 0 (the "
            f"dashed line). {INTERVALS}, all of the experiment's at once.",
            [target(f"evalstream:tier_pass_rate_difference{{{SEL}}}", "{{bound}}")],
            width=24,
            height=6,
            unit="percentunit",
            thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 0}],
            field={"decimals": 1, "noValue": "the baseline (or no baseline run yet)"},
            custom={"thresholdsStyle": {"mode": "dashed"}},
            overrides=band("difference", "purple"),
            options=timeseries_opts,
            extra={"repeat": "tier", "repeatDirection": "h", "maxPerRow": 4},
        ),
        row(lay, "Quality"),
        panel(
            lay,
            "timeseries",
            "Median composite score per tier",
            "Median of (pass + impl) / 2 over each window; the lines are the grade thresholds.",
            [target(f"evalstream:tier_composite_median{{{SEL}}}", legend)],
            unit="percentunit",
            minimum=0,
            maximum=1,
            thresholds=grade_steps,
            options=timeseries_opts,
            custom={"thresholdsStyle": {"mode": "line"}},
        ),
        panel(
            lay,
            "timeseries",
            "Pass rate (window mean)",
            "Share of the window's runs that passed.",
            [target(f"evalstream:tier_pass_rate_mean{{{SEL}}}", legend)],
            unit="percentunit",
            minimum=0,
            maximum=1,
            options=timeseries_opts,
        ),
        panel(
            lay,
            "timeseries",
            "Uplift vs baseline",
            "(median composite - baseline's) / baseline's; absent while the baseline has no data or scores 0.",
            [target(f"evalstream:tier_uplift_ratio{{{SEL}}}", legend)],
            unit="percentunit",
            options=timeseries_opts,
        ),
        panel(
            lay,
            "bargauge",
            "pass@k",
            "Unbiased pass@k over each window (k up to the runs in the window).",
            [
                target(
                    f"max by (experiment, tier, k) (evalstream_tier_pass_at_k{{{SEL}}})",
                    "{{experiment}} {{tier}} pass@{{k}}",
                )
            ],
            unit="percentunit",
            minimum=0,
            maximum=1,
            options={
                "displayMode": "gradient",
                "orientation": "horizontal",
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            },
        ),
        row(lay, "Cost"),
        panel(
            lay,
            "timeseries",
            "Median cost per run",
            "USD, billed or priced from tokens.",
            [target(f"evalstream:tier_cost_median_usd{{{SEL}}}", legend)],
            unit="currencyUSD",
            options=timeseries_opts,
        ),
        panel(
            lay,
            "stat",
            "Cost of pass (median)",
            "What one passing run costs; 'never passes' when no run of the window passed (+Inf).",
            [target(f"evalstream:tier_cost_of_pass_median_usd{{{SEL}}}", legend)],
            unit="currencyUSD",
            mappings=NEVER_PASSES,
            options={
                "colorMode": "value",
                "graphMode": "none",
                "textMode": "value_and_name",
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            },
        ),
        panel(
            lay,
            "timeseries",
            "Cross-tier variance",
            "Population variance of the tiers' medians: high means the experiment is sensitive to the tier.",
            [
                target(
                    f"max by (experiment) (evalstream_experiment_pass_rate_variance{{{EXP}}})",
                    "{{experiment}} pass rate",
                ),
                target(
                    f"max by (experiment) (evalstream_experiment_impl_rate_variance{{{EXP}}})",
                    "{{experiment}} impl rate",
                ),
                target(
                    f"max by (experiment) (evalstream_experiment_cost_variance{{{EXP}}})",
                    "{{experiment}} cost",
                ),
            ],
            options=timeseries_opts,
        ),
        panel(
            lay,
            "timeseries",
            "Cost delta across tiers",
            "Most minus least expensive tier, by median cost per run.",
            [
                target(
                    f"max by (experiment) (evalstream_experiment_cost_delta_usd{{{EXP}}})",
                    "{{experiment}}",
                )
            ],
            unit="currencyUSD",
            options=timeseries_opts,
        ),
        panel(
            lay,
            "bargauge",
            "Window fill",
            "Runs in each window over its capacity; grades and alerts only count full windows.",
            [target(f"evalstream:tier_window_fill_ratio{{{SEL}}}", legend)],
            width=24,
            height=6,
            unit="percentunit",
            minimum=0,
            maximum=1,
            options={
                "displayMode": "basic",
                "orientation": "vertical",
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            },
        ),
        row(lay, "Service"),
        panel(
            lay,
            "timeseries",
            "Runs processed per second",
            "Messages read from run-completed, runs that entered a window, and ignored runs.",
            [
                target("evalstream:runs_received:rate1m", "received"),
                target("evalstream:runs_accepted:rate1m", "accepted"),
                target("evalstream:runs_ignored:rate5m", "ignored {{reason}}"),
            ],
            width=8,
            unit="ops",
            options=timeseries_opts,
        ),
        panel(
            lay,
            "timeseries",
            "Rejected by reason",
            "Dead-lettered messages per second (they keep their original bytes on run-completed.dlq).",
            [
                target(
                    "sum by (reason) (rate(evalstream_runs_rejected_total[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            width=8,
            unit="ops",
            options=timeseries_opts,
        ),
        panel(
            lay,
            "timeseries",
            "Consumer lag",
            "Messages waiting on evalstream's source topics.",
            [target("evalstream:consumer_lag_messages", "{{topic}}")],
            width=8,
            options=timeseries_opts,
        ),
        panel(
            lay,
            "timeseries",
            "Processing latency per event",
            "p50 and p99 of the time one event takes in each stage.",
            [
                target(
                    "histogram_quantile(0.5, sum by (le, stage) (rate(evalstream_processing_seconds_bucket[$__rate_interval])))",
                    "p50 {{stage}}",
                ),
                target("evalstream:processing_seconds:p99", "p99 {{stage}}"),
            ],
            unit="s",
            options=timeseries_opts,
        ),
        panel(
            lay,
            "timeseries",
            "Run age at processing",
            "Processing time minus the run's completed_at: how far behind real time the grades are.",
            [
                target("evalstream:run_age_seconds:p50", "p50"),
                target("evalstream:run_age_seconds:p99", "p99"),
            ],
            unit="s",
            options=timeseries_opts,
        ),
    ]
    return {
        "uid": "evalstream-overview",
        "title": "evalstream overview",
        "description": "Live grades, quality, cost and service health of AI coding-agent evaluations.",
        "tags": ["evalstream"],
        "timezone": "browser",
        "schemaVersion": 38,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {
            "list": [
                variable(
                    "experiment",
                    "Experiment",
                    "label_values(evalstream:tier_grade_points, experiment)",
                    include_all=False,
                ),
                variable(
                    "tier", "Tier", f"label_values(evalstream:tier_grade_points{{{EXP}}}, tier)"
                ),
            ]
        },
        "annotations": {
            "list": [
                {
                    "name": "Grade changes",
                    "datasource": DS,
                    "enable": True,
                    "iconColor": "orange",
                    "expr": f"sum by (experiment, tier, direction) (increase(evalstream_grade_changes_total{{{SEL}}}[2m])) > 0",
                    "step": "30s",
                    "titleFormat": "Grade {{direction}}: {{experiment}}/{{tier}}",
                    "tagKeys": "experiment,tier,direction",
                    "textFormat": "",
                    "useValueForTime": False,
                },
                {
                    "name": "Tiers dropped",
                    "datasource": DS,
                    "enable": True,
                    "iconColor": "red",
                    "expr": f"evalstream:tier_dropped{{{SEL}}} == 1",
                    "step": "30s",
                    "titleFormat": "Dropped: {{experiment}}/{{tier}}",
                    "tagKeys": "experiment,tier",
                    "textFormat": "A drop detector paged (TierDropped)",
                    "useValueForTime": False,
                },
            ]
        },
        "panels": panels,
    }


def render() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {"evalstream-overview.json": json.dumps(overview(), indent=2, sort_keys=True) + "\n"}


def main(argv: list[str]) -> int:
    stale = []
    for name, text in render().items():
        path = OUT / name
        if "--check" in argv:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(
            f"stale dashboards: {', '.join(stale)}; run: python grafana/generate.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
