"""Generates grafana/dashboards/*.json. Run `python grafana/generate.py` after editing; a test fails
while the committed JSON differs from what this produces.

Plain dictionaries in Grafana's dashboard JSON model (schema 38, Grafana 10/11); every query
goes through the recording rules of prometheus/rules/ or plain evalstream metrics.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

PROVISIONED_UID = "evalstream-prometheus"
"""The compose stack's Prometheus (grafana/provisioning/): the datasource variable's default."""
DS = {"type": "prometheus", "uid": "${datasource}"}
"""Every panel, query, selector and annotation reads the `datasource` variable, so that the
dashboard imports into any Grafana and the viewer picks the Prometheus."""
OUT = Path(__file__).parent / "dashboards"
SEL = 'experiment=~"$experiment", tier=~"$tier"'
EXP = 'experiment=~"$experiment"'
TIER_LEGEND = "{{experiment}} {{tier}}"
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


def if_dropped(expr: str) -> str:
    """`expr` kept only for the tiers that are dropped (what TierDropped pages on)."""
    return f"{expr} and on (experiment, tier) ({DROPPED})"


def value_mappings(texts: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    """Value mappings that show each value (key) as its text in its colour, in the order given."""
    options = {
        value: {"text": text, "color": colour, "index": index}
        for index, (value, (text, colour)) in enumerate(texts.items())
    }
    return [{"type": "value", "options": options}]


def steps(base: str, *above: tuple[float, str]) -> list[dict[str, Any]]:
    """Absolute threshold steps: `base` below the first value, each colour from its value up."""
    return [{"color": base, "value": None}, *({"color": c, "value": v} for v, c in above)]


GRADE_COLOURS = ("red", "orange", "yellow", "#73BF69", "green")  # by grade points: F, D, C, B, A
GRADE_MAPPINGS = value_mappings(
    {str(points): ("FDCBA"[points], GRADE_COLOURS[points]) for points in range(4, -1, -1)}
)


def grade_steps(*bounds: float) -> list[dict[str, Any]]:
    """Thresholds in the grade colours: F below the first bound, each better grade from its own."""
    return steps(GRADE_COLOURS[0], *zip(bounds, GRADE_COLOURS[1:], strict=True))


# The "Drop detectors" state: 2 x dropped + 1 once the detectors run (their evidence exists).
DROP_STATES = value_mappings(
    {
        "0": ("warming up", "blue"),
        "1": ("watching", "green"),
        "2": ("DROPPED", "red"),
        "3": ("DROPPED", "red"),
    }
)
# A suite tier: 1 while its detectors' page is in effect (SuiteTierDropped), else 0.
SUITE_STATES = value_mappings({"0": ("watching", "green"), "1": ("DROPPED", "red")})
SIGNIFICANCE = value_mappings(
    {"1": ("higher", "green"), "0": ("not significant", "text"), "-1": ("lower", "red")}
)
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
# Settings several panels share.
SHARE: dict[str, Any] = {"unit": "percentunit", "minimum": 0, "maximum": 1}  # a 0-1 share, as %
LAST_VALUE = {"calcs": ["lastNotNull"], "fields": "", "values": False}
LEGEND_TABLE = {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull"]}}


class Layout:
    """Places panels left to right, 24 columns wide."""

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.row_height = 0
        self.next_id = 1

    def place(self, width: int, height: int) -> dict[str, int]:
        """The grid position of the next panel: to the right of the last, or below when full."""
        if self.x + width > 24:
            self.x, self.y = 0, self.y + self.row_height
            self.row_height = 0
        pos = {"x": self.x, "y": self.y, "w": width, "h": height}
        self.x += width
        self.row_height = max(self.row_height, height)
        return pos

    def new_row(self) -> dict[str, int]:
        """The grid position of a row header, below everything placed so far."""
        if self.x:
            self.x, self.y = 0, self.y + self.row_height
        pos = {"x": 0, "y": self.y, "w": 24, "h": 1}
        self.y += 1
        self.row_height = 0
        return pos

    def id(self) -> int:
        """The next panel id, 1, 2, … in the order panels and rows are made."""
        self.next_id += 1
        return self.next_id - 1


def ref_id(index: int) -> str:
    """The refId of a panel's query at `index`: A, B, C, …"""
    return chr(ord("A") + index)


def target(expr: str, legend: str = "") -> dict[str, Any]:
    """A range query; `panel` gives it its refId."""
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": "A", "range": True}


def tier_series(rule: str, legend: str = TIER_LEGEND) -> dict[str, Any]:
    """The recording rule `evalstream:<rule>` for the selected experiments and tiers."""
    return target(f"evalstream:{rule}{{{SEL}}}", legend)


def experiment_series(gauge: str, legend: str) -> dict[str, Any]:
    """The gauge `evalstream_experiment_<gauge>`, one series per selected experiment."""
    return target(f"max by (experiment) (evalstream_experiment_{gauge}{{{EXP}}})", legend)


def instant_table(expr: str, legend: str = "") -> dict[str, Any]:
    """A table query: one row per series, its last value."""
    return {**target(expr, legend), "format": "table", "instant": True, "range": False}


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
    """A panel of `kind` placed next on `layout`, its queries lettered A, B, … in order."""
    defaults: dict[str, Any] = {"unit": unit, "mappings": mappings or [], **(field or {})}
    if custom:
        defaults["custom"] = custom
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    defaults["thresholds"] = {"mode": "absolute", "steps": thresholds or steps("green")}
    result: dict[str, Any] = {
        "type": kind,
        "id": layout.id(),
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": layout.place(width, height),
        "targets": [{**t, "refId": ref_id(i)} for i, t in enumerate(targets)],
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": options or {},
    }
    result.update(extra or {})
    return result


def repeat_per_tier(per_row: int) -> dict[str, Any]:
    """Panel keys that draw the panel once per selected tier, side by side, `per_row` to a row."""
    return {"repeat": "tier", "repeatDirection": "h", "maxPerRow": per_row}


def timeseries(
    layout: Layout, title: str, description: str, targets: list[dict[str, Any]], **kwargs: Any
) -> dict[str, Any]:
    """A time series panel whose legend is a table of each series' last value, on the right."""
    return panel(layout, "timeseries", title, description, targets, options=LEGEND_TABLE, **kwargs)


def per_tier_timeseries(
    layout: Layout, title: str, description: str, targets: list[dict[str, Any]], **kwargs: Any
) -> dict[str, Any]:
    """A time series drawn once per selected tier, side by side, four to a row."""
    return timeseries(
        layout, title, description, targets, width=24, height=6, extra=repeat_per_tier(4), **kwargs
    )


def stat_options(colour_mode: str, graph_mode: str = "none") -> dict[str, Any]:
    """Stat panel options that show each series' last value beside its name."""
    return {
        "colorMode": colour_mode,
        "graphMode": graph_mode,
        "textMode": "value_and_name",
        "reduceOptions": LAST_VALUE,
    }


def bargauge_options(display_mode: str, orientation: str) -> dict[str, Any]:
    """Bar gauge options: one bar per series, at its last value."""
    return {"displayMode": display_mode, "orientation": orientation, "reduceOptions": LAST_VALUE}


def by_name(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    """A field override: the series or column called `name` gets `properties` (id -> value)."""
    return {
        "matcher": {"id": "byName", "options": name},
        "properties": [{"id": key, "value": value} for key, value in properties.items()],
    }


def band(name: str, colour: str) -> list[dict[str, Any]]:
    """Overrides that draw the `low` and `high` series of a `{{bound}}` legend as a shaded band
    around `estimate` (renamed `name`), all in `colour`."""
    fixed = {"color": {"mode": "fixed", "fixedColor": colour}}
    return [
        by_name("estimate", {**fixed, "displayName": name, "custom.lineWidth": 2}),
        by_name(
            "high",
            {**fixed, "custom.fillBelowTo": "low", "custom.fillOpacity": 20, "custom.lineWidth": 0},
        ),
        by_name("low", {**fixed, "custom.lineWidth": 0}),
    ]


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


def joined_table(
    layout: Layout,
    title: str,
    description: str,
    columns: dict[str, str],
    *,
    rows: str | None = None,
    sort_by: str | None = None,
    descending: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """A table joining instant queries per series: `columns` names them; `rows` only picks rows;
    sorted by the column `sort_by`, if given."""
    hidden = ("A",) if rows else ()
    queries = [*([rows] if rows else []), *columns.values()]
    named = {ref_id(i): name for i, name in enumerate(columns, start=len(hidden))}
    options: dict[str, Any] = {"showHeader": True}
    if sort_by:
        options["sortBy"] = [{"displayName": sort_by, "desc": descending}]
    return panel(
        layout,
        "table",
        title,
        description,
        [instant_table(query) for query in queries],
        options=options,
        extra=merged_table(named, hidden),
        **kwargs,
    )


def section(
    lay: Layout, title: str, *panels: Callable[[Layout], dict[str, Any]]
) -> list[dict[str, Any]]:
    """A row and its panels, laid out in this order."""
    return [row(lay, title), *(make(lay) for make in panels)]


def lowest_grades(lay: Layout) -> dict[str, Any]:
    """The ten tiers with the worst full-window grade, over every experiment."""
    return panel(
        lay,
        "table",
        "Lowest full-window grades",
        "The 10 tiers with the lowest grade on a full window, over every experiment (not only "
        "the selected ones): where to look first among thousands.",
        [instant_table("bottomk(10, evalstream:tier_grade_points:full)", TIER_LEGEND)],
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
    )


def dropped_tiers(lay: Layout) -> dict[str, Any]:
    """Every dropped tier of every experiment, with its pass rates: what TierDropped paged on."""
    return joined_table(
        lay,
        "Dropped tiers",
        "Every tier whose drop detectors paged and whose runs are not back at its reference "
        "(what TierDropped pages on), over every experiment: its pass rate over its window "
        "and over all its runs. Empty is good.",
        {
            "pass rate, window": if_dropped("evalstream:tier_pass_rate_mean"),
            "pass rate, all runs": if_dropped(
                'max by (experiment, tier) (evalstream:tier_cumulative_pass_rate{bound="estimate"})'
            ),
            "runs": if_dropped("max by (experiment, tier) (evalstream_tier_cumulative_runs)"),
        },
        rows=DROPPED,
        width=9,
        height=7,
        unit="percentunit",
        field={"noValue": "no tier dropped"},
        overrides=[by_name("runs", {"unit": "short"})],
    )


def suite_gauge(name: str, selector: str = "", by: str = "suite, tier") -> str:
    """The gauge `evalstream_suite_<name>`, one series per suite tier (and `by`) across workers:
    a suite tier whose partition moves stays one row."""
    matchers = f"{{{selector}}}" if selector else ""
    return f"max by ({by}) (evalstream_suite_{name}{matchers})"


def suites_table(lay: Layout) -> dict[str, Any]:
    """Every suite tier: whether it pages, its pass rate and difference from the baseline with
    the difference's interval and the experiments it covers, each detector's evidence, what it
    counts."""
    evidence = {
        "unit": "none",
        "decimals": 2,
        "thresholds": {"mode": "absolute", "steps": steps("green", (1, "red"))},
        "custom.cellOptions": {"type": "color-text"},
    }
    return joined_table(
        lay,
        "Suites",
        "Every suite (all experiments of one agent: the events' suite, or their model) per tier: "
        "DROPPED while its detectors' page is in effect (SuiteTierDropped); its pass rate, the "
        "mean of its experiments' (each weighing the same); its pass rate minus the baseline's, "
        "paired by experiment, with the interval (low, high) that holds at every look, all of a "
        "suite's tiers at once, over the experiments paired so far (paired; for the baseline, "
        "those it ran in); the same for its mean composite score; each detector's evidence as a fraction of its threshold (1 pages), "
        "and the experiments and runs it counts. A suite of one experiment never pages (its "
        "tiers' own TierDropped does).",
        {
            "state": suite_gauge("dropped"),
            "pass rate": suite_gauge("pass_rate", 'bound="estimate"'),
            "vs baseline": suite_gauge("pass_rate_difference", 'bound="estimate"'),
            "low": suite_gauge("pass_rate_difference", 'bound="low"'),
            "high": suite_gauge("pass_rate_difference", 'bound="high"'),
            "composite": suite_gauge("mean_composite", 'bound="estimate"'),
            "composite vs baseline": suite_gauge("mean_composite_difference", 'bound="estimate"'),
            "composite low": suite_gauge("mean_composite_difference", 'bound="low"'),
            "composite high": suite_gauge("mean_composite_difference", 'bound="high"'),
            "paired": suite_gauge("experiments_paired"),
            "pass_rate evidence": suite_gauge("drop_evidence_ratio", 'detector="pass_rate"'),
            "score evidence": suite_gauge("drop_evidence_ratio", 'detector="score"'),
            "experiments": suite_gauge("experiments"),
            "runs": suite_gauge("runs"),
        },
        sort_by="state",
        descending=True,
        width=24,
        field={"noValue": "no suite yet"},
        overrides=[
            by_name(
                "state", {"mappings": SUITE_STATES, "custom.cellOptions": {"type": "color-text"}}
            ),
            *(
                by_name(name, {"unit": "percentunit", "decimals": 1})
                for name in (
                    "pass rate",
                    "vs baseline",
                    "low",
                    "high",
                    "composite",
                    "composite vs baseline",
                    "composite low",
                    "composite high",
                )
            ),
            by_name("pass_rate evidence", evidence),
            by_name("score evidence", evidence),
        ],
    )


def suite_differences(lay: Layout, figure: str, gauge: str) -> dict[str, Any]:
    """Each suite tier's `figure` minus the baseline's over time (the gauge `gauge`), with its
    interval."""
    thin = {"custom.lineWidth": 1, "custom.lineStyle": {"fill": "dash", "dash": [4, 4]}}
    return timeseries(
        lay,
        f"Suite {figure} vs baseline",
        f"Each suite tier's {figure} minus the baseline's, paired by experiment (each weighing "
        "the same), in percentage points; the dashed lines are its interval, which holds at "
        "every look, all of a suite's tiers at once, over the experiments paired so far. "
        "Significant while both dashed lines lie on one side of 0.",
        [
            target(suite_gauge(gauge, 'bound="estimate"'), "{{suite}} {{tier}}"),
            target(
                suite_gauge(gauge, 'bound=~"low|high"', "suite, tier, bound"),
                "{{suite}} {{tier}} {{bound}}",
            ),
        ],
        unit="percentunit",
        thresholds=steps("red", (0, "green")),
        field={"decimals": 1, "noValue": "no suite tier paired with its baseline yet"},
        custom={"thresholdsStyle": {"mode": "dashed"}},
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".* (low|high)$"},
                "properties": [{"id": key, "value": value} for key, value in thin.items()],
            }
        ],
    )


def suite_evidence(lay: Layout) -> dict[str, Any]:
    """Each suite tier's detectors' evidence over time."""
    return timeseries(
        lay,
        "Suite drop evidence",
        "Each suite tier's drop detectors (pass_rate, score; the larger of the pooled and sparse "
        "statistics) as a fraction of the threshold on a log scale: 1 (the dashed line) is "
        "where SuiteTierDropped pages, if the suite has two experiments or more.",
        [
            target(
                suite_gauge("drop_evidence_ratio", by="suite, tier, detector"),
                "{{suite}} {{tier}} {{detector}}",
            )
        ],
        unit="none",
        minimum=0,
        thresholds=steps("green", (1, "red")),
        field={"decimals": 2},
        custom={"thresholdsStyle": {"mode": "dashed"}, "axisSoftMax": 1.2},
    )


def population(lay: Layout) -> dict[str, Any]:
    """How many experiments and tiers the service watches, retired and dropped."""
    return panel(
        lay,
        "stat",
        "Experiments and tiers",
        "Experiments with a window on some worker, and the tiers with a gauge; both fall as "
        "idle experiments retire (experiment_idle_ttl_s).",
        [
            target("sum(evalstream_experiments)", "experiments"),
            target("count(evalstream:tier_grade_points)", "tiers"),
            target("sum(increase(evalstream_experiments_retired_total[1d]))", "retired in 1d"),
            target("sum(evalstream:tier_dropped)", "dropped tiers"),
        ],
        width=6,
        height=7,
        options=stat_options("none", graph_mode="area"),
    )


def grades(lay: Layout) -> list[dict[str, Any]]:
    """The headline: each selected tier's letter grade, per experiment."""
    return [
        row(lay, "Grades"),
        panel(
            lay,
            "stat",
            "Grade of $tier",
            "Letter grade of the median composite score of each experiment's 10-run window of this tier.",
            [tier_series("tier_grade_points", "{{experiment}}")],
            width=6,
            height=5,
            mappings=GRADE_MAPPINGS,
            thresholds=grade_steps(1, 2, 3, 4),
            options=stat_options("background"),
            extra=repeat_per_tier(6),
        ),
    ]


def drop_detectors(lay: Layout) -> dict[str, Any]:
    """Each selected tier's drop state over time: warming up, watching or dropped."""
    return panel(
        lay,
        "state-timeline",
        "Drop detectors",
        "Per tier: warming up (its detectors still learn its reference from its first "
        "drop_warmup_runs runs), watching, or DROPPED (a detector paged and the runs are not "
        "back at the reference: TierDropped). Noise alone pages a tier at most once per "
        "drop_false_page_runs runs.",
        [target(DROP_STATE, TIER_LEGEND)],
        mappings=DROP_STATES,
        options={
            "showValue": "auto",
            "mergeValues": True,
            "rowHeight": 0.85,
            "legend": {"showLegend": False},
        },
    )


def baseline_differences(lay: Layout) -> dict[str, Any]:
    """Each selected tier's pass rate minus its baseline's, with its interval and significance."""
    return joined_table(
        lay,
        "Pass rate vs baseline (all runs)",
        "Each tier's pass rate over all its runs minus the baseline tier's, with its interval, "
        f"in percentage points. {INTERVALS}, and all of an experiment's intervals hold at "
        "once; 'not significant' when the interval holds 0.",
        {
            "estimate": difference("estimate"),
            "low": difference("low"),
            "high": difference("high"),
            "significant": f"({difference('low')} > bool 0) - ({difference('high')} < bool 0)",
        },
        sort_by="estimate",
        unit="percentunit",
        field={"decimals": 1, "noValue": "no baseline run yet"},
        overrides=[
            by_name(
                "significant",
                {
                    "unit": "short",
                    "mappings": SIGNIFICANCE,
                    "custom.cellOptions": {"type": "color-text"},
                },
            )
        ],
    )


def per_tier_intervals(lay: Layout) -> list[dict[str, Any]]:
    """Per selected experiment and tier over time: drop evidence, and pass rates with intervals."""
    return [
        row(lay, "$experiment: drop evidence and intervals per tier", repeat="experiment"),
        per_tier_timeseries(
            lay,
            "Drop evidence · $tier",
            "Each drop detector's evidence of a fall below the tier's reference, as a fraction of "
            "its threshold on a log scale: 1 (the dashed line) pages. The pass_rate detector "
            "watches passes, the score detector the judge scores. Absent while it warms up.",
            [tier_series("tier_drop_evidence_ratio", "{{detector}}")],
            unit="none",
            minimum=0,
            thresholds=steps("green", (1, "red")),
            field={"decimals": 2},
            custom={"thresholdsStyle": {"mode": "dashed"}, "axisSoftMax": 1.2},
        ),
        per_tier_timeseries(
            lay,
            "Pass rate over all runs · $tier",
            f"The tier's pass rate over every run since its first, and its interval (the band). "
            f"{INTERVALS}.",
            [tier_series("tier_cumulative_pass_rate", "{{bound}}")],
            **SHARE,
            overrides=band("pass rate", "blue"),
        ),
        per_tier_timeseries(
            lay,
            "Pass rate vs baseline · $tier",
            "The tier's pass rate over all its runs minus the baseline tier's, in percentage "
            f"points, and its interval (the band); significant while the band excludes 0 (the "
            f"dashed line). {INTERVALS}, all of the experiment's at once.",
            [tier_series("tier_pass_rate_difference", "{{bound}}")],
            unit="percentunit",
            thresholds=steps("red", (0, "green")),
            field={"decimals": 1, "noValue": "the baseline (or no baseline run yet)"},
            custom={"thresholdsStyle": {"mode": "dashed"}},
            overrides=band("difference", "purple"),
        ),
    ]


def quality(lay: Layout) -> list[dict[str, Any]]:
    """How good the selected tiers' runs are: composite score, pass rate, uplift and pass@k."""
    return [
        row(lay, "Quality"),
        timeseries(
            lay,
            "Median composite score per tier",
            "Median of (pass + impl) / 2 over each window; the lines are the grade thresholds.",
            [tier_series("tier_composite_median")],
            **SHARE,
            thresholds=grade_steps(0.65, 0.75, 0.85, 0.95),
            custom={"thresholdsStyle": {"mode": "line"}},
        ),
        timeseries(
            lay,
            "Pass rate (window mean)",
            "Share of the window's runs that passed.",
            [tier_series("tier_pass_rate_mean")],
            **SHARE,
        ),
        timeseries(
            lay,
            "Uplift vs baseline",
            "(median composite - baseline's) / baseline's; absent while the baseline has no data or scores 0.",
            [tier_series("tier_uplift_ratio")],
            unit="percentunit",
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
            **SHARE,
            options=bargauge_options("gradient", "horizontal"),
        ),
    ]


def cost(lay: Layout) -> list[dict[str, Any]]:
    """What the selected tiers' runs cost and how much the tiers differ, then the windows' fill."""
    return [
        row(lay, "Cost"),
        timeseries(
            lay,
            "Median cost per run",
            "USD, billed or priced from tokens.",
            [tier_series("tier_cost_median_usd")],
            unit="currencyUSD",
        ),
        panel(
            lay,
            "stat",
            "Cost of pass (median)",
            "What one passing run costs; 'never passes' when no run of the window passed (+Inf).",
            [tier_series("tier_cost_of_pass_median_usd")],
            unit="currencyUSD",
            mappings=NEVER_PASSES,
            options=stat_options("value"),
        ),
        timeseries(
            lay,
            "Cross-tier variance",
            "Population variance of the tiers' medians: high means the experiment is sensitive to the tier.",
            [
                experiment_series("pass_rate_variance", "{{experiment}} pass rate"),
                experiment_series("impl_rate_variance", "{{experiment}} impl rate"),
                experiment_series("cost_variance", "{{experiment}} cost"),
            ],
        ),
        timeseries(
            lay,
            "Cost delta across tiers",
            "Most minus least expensive tier, by median cost per run.",
            [experiment_series("cost_delta_usd", "{{experiment}}")],
            unit="currencyUSD",
        ),
        panel(
            lay,
            "bargauge",
            "Window fill",
            "Runs in each window over its capacity; grades and alerts only count full windows.",
            [tier_series("tier_window_fill_ratio")],
            width=24,
            height=6,
            **SHARE,
            options=bargauge_options("basic", "vertical"),
        ),
    ]


def service(lay: Layout) -> list[dict[str, Any]]:
    """The service's own health: throughput, rejects, lag and latency."""
    return [
        row(lay, "Service"),
        timeseries(
            lay,
            "Runs processed per second",
            "Messages read from run-completed, runs that entered a window, and ignored runs.",
            [
                target("evalstream:runs_received:rate1m", "received"),
                target("evalstream:runs_accepted:rate1m", "accepted"),
                target("evalstream:runs_ignored:rate5m", "ignored {{reason}}"),
            ],
            width=8,
            unit="ops",
        ),
        timeseries(
            lay,
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
        ),
        timeseries(
            lay,
            "Consumer lag",
            "Messages waiting on evalstream's source topics.",
            [target("evalstream:consumer_lag_messages", "{{topic}}")],
            width=8,
        ),
        timeseries(
            lay,
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
        ),
        timeseries(
            lay,
            "Run age at processing",
            "Processing time minus the run's completed_at: how far behind real time the grades are.",
            [
                target("evalstream:run_age_seconds:p50", "p50"),
                target("evalstream:run_age_seconds:p99", "p99"),
            ],
            unit="s",
        ),
    ]


def overview() -> dict[str, Any]:
    """The evalstream overview dashboard: its selectors, annotations and rows, top to bottom."""
    lay = Layout()
    return {
        "uid": "evalstream-overview",
        "title": "evalstream overview",
        "description": "Live grades, quality, cost and service health of AI coding-agent evaluations.",
        "tags": ["evalstream"],
        "timezone": "browser",
        "schemaVersion": 38,
        "version": 1,
        "editable": False,  # generated: edit grafana/generate.py
        "refresh": "10s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": variables()},
        "annotations": {"list": event_annotations()},
        "panels": [
            # Where to look first among thousands: the worst and the dropped tiers, their count.
            *section(lay, "Across all experiments", lowest_grades, dropped_tiers, population),
            # An agent's fall across its experiments: the suites' own detectors.
            *section(
                lay,
                "Suites (all experiments of an agent)",
                suites_table,
                partial(suite_differences, figure="pass rate", gauge="pass_rate_difference"),
                partial(
                    suite_differences,
                    figure="mean composite",
                    gauge="mean_composite_difference",
                ),
                suite_evidence,
            ),
            *grades(lay),
            # Which selected tiers dropped, and which differ significantly from their baseline.
            *section(
                lay,
                "Drop detectors and differences from the baseline",
                drop_detectors,
                baseline_differences,
            ),
            *per_tier_intervals(lay),
            *quality(lay),
            *cost(lay),
            *service(lay),
        ],
    }


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


def datasource_variable() -> dict[str, Any]:
    """The Prometheus every query reads: the provisioned one unless the viewer picks another
    (where it does not exist, Grafana falls back to its default Prometheus)."""
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {"selected": False, "text": "Prometheus", "value": PROVISIONED_UID},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
        "skipUrlSync": False,
    }


def variables() -> list[dict[str, Any]]:
    """The datasource, then the selectors every panel's query filters on: experiments, then
    their tiers."""
    return [
        datasource_variable(),
        variable(
            "experiment",
            "Experiment",
            "label_values(evalstream:tier_grade_points, experiment)",
            include_all=False,
        ),
        variable("tier", "Tier", f"label_values(evalstream:tier_grade_points{{{EXP}}}, tier)"),
    ]


def annotation(
    name: str, colour: str, expr: str, *, title: str, tags: str, text: str = ""
) -> dict[str, Any]:
    """An annotation marking each moment `expr` has a series, checked every 30 s."""
    return {
        "name": name,
        "datasource": DS,
        "enable": True,
        "iconColor": colour,
        "expr": expr,
        "step": "30s",
        "titleFormat": title,
        "tagKeys": tags,
        "textFormat": text,
        "useValueForTime": False,
    }


def event_annotations() -> list[dict[str, Any]]:
    """Marks on every time series: the selected tiers' grade changes and drops."""
    return [
        annotation(
            "Grade changes",
            "orange",
            f"sum by (experiment, tier, direction) (increase(evalstream_grade_changes_total{{{SEL}}}[2m])) > 0",
            title="Grade {{direction}}: {{experiment}}/{{tier}}",
            tags="experiment,tier,direction",
        ),
        annotation(
            "Tiers dropped",
            "red",
            f"evalstream:tier_dropped{{{SEL}}} == 1",
            title="Dropped: {{experiment}}/{{tier}}",
            tags="experiment,tier",
            text="A drop detector paged (TierDropped)",
        ),
    ]


def render() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {"evalstream-overview.json": json.dumps(overview(), indent=2, sort_keys=True) + "\n"}


def main(argv: list[str]) -> int:
    """Writes the dashboards, or with `--check` returns 1 while a committed one differs."""
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
