"""The demo's live view (and `stream-app status EXPERIMENT`): what the output topics say, as a
terminal table. Pure rendering of a `LiveState` that the demo feeds from `tier-aggregates`,
`cross-tier-reports`, `grade-changes` and `suite-tiers`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.aggregates import Statistics, TierAggregate
from schemas.common import tier_sort_key
from schemas.cross_tier import CrossTierReport
from schemas.grade_change import GradeChange
from schemas.suites import SuiteTier
from stream_app.core.keys import split_tier_key
from stream_app.terminal.records import (
    NOT_SIGNIFICANT,
    Compared,
    KafkaRecord,
    Kind,
    decode,
    difference_text,
    experiments_paired,
    pass_rate_text,
    suite_figure_text,
)
from stream_app.terminal.text import printable

HIGHLIGHT_S = 15.0
GRADE_COLOURS = {"A": "32", "B": "36", "C": "33", "D": "35", "F": "31"}
DIM = "2"
DROPPED = "1;31"
GRADE_WIDTH = 12  # "filling 9/10"; wider capacities push the row, not the grade out
EXPERIMENT_WIDTH = 14
PASS_RATE_WIDTH = 19  # "100.0 [91.1, 100.0]"
DIFFERENCE_WIDTH = 24  # "-33.3 [-100.0, +100.0] ~"; a wider one pushes the row
SUITE_WIDTH = 18  # an agent's name, cut: "claude-sonnet-4-5-"
SUITE_EXPERIMENTS_WIDTH = 22  # "999 experiments paired"
SUITE_RUNS_WIDTH = 7


@dataclass
class LiveState:
    """The latest output per key, so the table can be redrawn from scratch at every refresh."""

    aggregates: dict[tuple[str, str], TierAggregate] = field(default_factory=dict)
    reports: dict[str, CrossTierReport] = field(default_factory=dict)
    changes: list[tuple[float, GradeChange]] = field(default_factory=list)
    suites: dict[tuple[str, str], SuiteTier] = field(default_factory=dict)

    def add(self, kind: Kind, record: KafkaRecord) -> None:
        """A record of an output topic: the latest aggregate of a tier, report of an experiment,
        or suite tier, or a grade change; a tombstone retires its key.

        Raises:
            ValidationError: the record is not what a topic of its kind holds.
        """
        if record.value is None:
            self.retire(kind, (record.key or b"").decode())
            return
        value = decode(kind, record.value)
        if isinstance(value, TierAggregate):
            self.aggregates[(value.experiment_id, value.tier)] = value
        elif isinstance(value, CrossTierReport):
            self.reports[value.experiment_id] = value
        elif isinstance(value, SuiteTier):
            self.suites[(value.suite, value.tier)] = value
        elif isinstance(value, GradeChange):
            self.add_change(value)

    def retire(self, kind: Kind, key: str) -> None:
        """A tombstone's key on a `kind` topic: a retired tier (`experiment/tier`), experiment or
        suite tier (`suite/tier`)."""
        if kind == "aggregates":
            self.aggregates.pop(split_tier_key(key), None)
        elif kind == "cross_tier":
            self.reports.pop(key, None)
        elif kind == "suite_tiers":
            self.suites.pop(split_tier_key(key), None)

    def add_change(self, change: GradeChange, now: float | None = None) -> None:
        """Remember a grade change and when it arrived, to highlight it for a while."""
        self.changes.append((now if now is not None else time.monotonic(), change))
        del self.changes[:-50]


Paint = Callable[[str, str], str]


def _plain(text: str, code: str) -> str:
    return text


def _pad(cell: str, plain: str, width: int) -> str:
    """`cell` (`plain` painted) left-aligned in `width` columns, the escapes not counted."""
    return cell + " " * max(width - len(plain), 0)


def _grade_cell(agg: TierAggregate, paint: Paint) -> str:
    """The grade of a full window, with "DROPPED" while the tier's drop detectors (what
    `TierDropped` pages on) say it dropped, or "warming" while they still learn the tier's
    reference; a window still filling says so instead, since its grade is of fewer runs than the
    grade changes are about (and its detectors are warming up too)."""
    if agg.runs < agg.capacity:
        text = f"filling {agg.runs}/{agg.capacity}"
        if agg.drop.dropped:
            return paint(f"{text + ' DROPPED':<{GRADE_WIDTH}}", GRADE_COLOURS["F"])
        return paint(f"{text:<{GRADE_WIDTH}}", DIM)
    letter = paint(agg.grade, GRADE_COLOURS[agg.grade])
    if agg.drop.dropped:
        return _pad(f"{letter} {paint('DROPPED', DROPPED)}", f"{agg.grade} DROPPED", GRADE_WIDTH)
    if not agg.drop.monitoring:
        return _pad(f"{letter} {paint('warming', DIM)}", f"{agg.grade} warming", GRADE_WIDTH)
    return _pad(letter, agg.grade, GRADE_WIDTH)


def _difference_cell(
    tier: str, report: CrossTierReport | None, paint: Paint, width: int = DIFFERENCE_WIDTH
) -> str:
    """The tier's cumulative pass rate minus the baseline's, right-aligned so that the numbers
    line up whether or not the `~` follows them; green or red when significant, dim when not."""
    baseline = report is not None and tier == report.baseline_tier
    difference = report.pass_rate_difference.get(tier) if report is not None else None
    return _compared_cell(baseline, difference, paint, width)


def _compared_cell(
    baseline: bool, difference: Compared | None, paint: Paint, width: int = DIFFERENCE_WIDTH
) -> str:
    """The word baseline, "—" before there is a difference, else the difference right-aligned
    so that the numbers line up whether or not the `~` follows them; green or red when
    significant, dim when not."""
    mark = len(NOT_SIGNIFICANT) + 1
    if baseline:
        return f"{'baseline':>{width - mark}}{' ' * mark}"
    if difference is None:  # no report yet, or the baseline has no run
        return f"{'—':>{width - mark}}{' ' * mark}"
    text = difference_text(difference)
    if not difference.significant:
        return paint(f"{text:>{width}}", DIM)
    cell = f"{text:>{width - mark}}"
    return paint(cell, "32" if difference.estimate > 0 else "31") + " " * mark


def _money(stats: Statistics | None) -> str:
    """A cost of pass's median, or `unpriced` while no run of the window is priced."""
    if stats is None:
        return "unpriced"
    return "never passes" if math.isinf(stats.median) else f"${stats.median:.4f}"


def _uplift(report: CrossTierReport | None, tier: str) -> str:
    uplift = report.tier_uplift.get(tier) if report else None
    return f"{uplift:+.1%}" if uplift is not None else "—"


def legend(level: float, capacity: int) -> list[str]:
    """What the columns and marks mean, below the table."""
    return [
        f"runs, pass %: over all the tier's runs; grade, composite, uplift, cost of pass: over its "
        f"last {capacity} runs (the window).",
        "vs baseline: the tier's pass % minus the baseline tier's, in points; "
        f"{NOT_SIGNIFICANT} = not significant (the interval holds 0).",
        f"[intervals]: {level:.0%}, anytime-valid (they hold however often you look); an "
        "experiment's differences hold all at once.",
        "warming = the drop detectors are still learning the tier's reference; DROPPED = a "
        "detector paged (alert TierDropped).",
    ]


SUITE_LEGEND = (
    "a suite is every experiment of one agent; pass %: the mean of its experiments' pass rates, "
    "each weighing the same.",
    "vs baseline: its pass rate minus the baseline's, paired by experiment (each weighing the "
    "same), over those paired;",
    "comp: the same for its mean composite score, in %. A suite's differences of each hold all at "
    "once.",
    "DROPPED = its detectors paged (alert SuiteTierDropped).",
    # A suite of one experiment never pages (core.suite.statistics.MIN_EXPERIMENTS): its tiers' own
    # detectors watch that experiment (TierDropped). Not imported: it would load the detectors.
    "% to a page: the larger of its detectors' evidence, 100 % pages; a suite of one experiment "
    "never pages (its tiers do).",
)


def _in_order(key: tuple[str, str]) -> tuple[str, int, tuple[int, str]]:
    """A `(name, tier)` key's place: by name, then numeric tier (T2 < T10); a tier name that is
    not one (a foreign record's) after the others, so it cannot stop the table."""
    name, tier = key
    try:
        return name, 0, tier_sort_key(tier)
    except ValueError:
        return name, 1, (0, tier)


def _suite_state(suite: SuiteTier, paint: Paint) -> str:
    """DROPPED while the suite's detectors say so, else the larger evidence as the percentage of
    the way to a page."""
    if suite.drop.dropped:
        return paint("DROPPED", DROPPED)
    if not suite.drop.evidence:
        return paint("no evidence yet", DIM)
    share = 100 * max(suite.drop.evidence.values())
    # Rounded down: 99.6 % is not a page yet.
    percent = str(math.floor(share)) if math.isfinite(share) else f"{share:.0f}"
    return f"{percent:>3} % to a page"


def render_suites(state: LiveState, paint: Paint, colour: bool) -> list[str]:
    """The suite section: one row per suite tier, by suite then numeric tier, and its legend;
    nothing without suites."""
    if not state.suites:
        return []
    columns = (
        f"{'suite':<{SUITE_WIDTH}} {'tier':<4} {'pass % [interval]':>{PASS_RATE_WIDTH}} "
        f"{'vs baseline':>{DIFFERENCE_WIDTH}} {'covers':<{SUITE_EXPERIMENTS_WIDTH}} "
        f"{'runs':>{SUITE_RUNS_WIDTH}} drop detectors"
    )
    lines = ["", paint(columns, "1") if colour else columns]
    for key in sorted(state.suites, key=_in_order):
        suite = state.suites[key]
        name = printable(suite.suite)[:SUITE_WIDTH]
        baseline = suite.tier == suite.baseline_tier
        lines.append(
            f"{name:<{SUITE_WIDTH}} {printable(suite.tier):<4} "
            f"{suite_figure_text(suite.pass_rate):>{PASS_RATE_WIDTH}} "
            f"{_compared_cell(baseline, suite.pass_rate_difference, paint)} "
            f"{experiments_paired(suite):<{SUITE_EXPERIMENTS_WIDTH}} "
            f"{suite.runs:>{SUITE_RUNS_WIDTH}} {_suite_state(suite, paint)}"
        )
        composite = _compared_cell(baseline, suite.mean_composite_difference, paint).rstrip()
        lines.append(
            f"{'':<{SUITE_WIDTH}} {'comp':<4} "
            f"{suite_figure_text(suite.mean_composite):>{PASS_RATE_WIDTH}} {composite}"
        )
    return lines + [""] + [paint(line, DIM) for line in SUITE_LEGEND]


def render(state: LiveState, header: str, colour: bool, now: float | None = None) -> str:
    """The live table as text: tiers with their grades, their pass rates over all their runs and
    the differences from the baseline with their intervals, the drop detectors' state; the suites'
    tiers below them, and recent grade changes."""
    now = now if now is not None else time.monotonic()

    def paint(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if colour else text

    recent: dict[tuple[str, str], GradeChange] = {}
    for at, change in state.changes:
        if now - at <= HIGHLIGHT_S:
            recent[(change.experiment_id, change.tier)] = change
    lines = [header, ""]
    columns = (
        f"{'experiment':<{EXPERIMENT_WIDTH}} {'tier':<4} {'runs':>5} {'grade':<{GRADE_WIDTH}} "
        f"{'composite':>9} {'pass % [interval]':>{PASS_RATE_WIDTH}} "
        f"{'vs baseline, points':>{DIFFERENCE_WIDTH}} {'uplift':>7} {'cost of pass':>12}"
    )
    lines.append(paint(columns, "1") if colour else columns)
    keys = sorted(state.aggregates, key=_in_order)
    for experiment, tier in keys:
        agg = state.aggregates[(experiment, tier)]
        report = state.reports.get(experiment)
        highlight = recent.get((experiment, tier))
        # A highlighted row is painted as a whole: a cell's own colour would end its background.
        cell_paint = _plain if highlight is not None else paint
        row = (
            f"{experiment[:EXPERIMENT_WIDTH]:<{EXPERIMENT_WIDTH}} {tier:<4} "
            f"{agg.cumulative.runs:>5} {_grade_cell(agg, cell_paint)} "
            f"{agg.composite_score.median:>9.3f} "
            f"{pass_rate_text(agg.cumulative):>{PASS_RATE_WIDTH}} "
            f"{_difference_cell(tier, report, cell_paint)} "
            f"{_uplift(report, tier):>7} {_money(agg.cost_of_pass):>12}"
        )
        if highlight is not None:
            arrow = "▼" if highlight.direction == "drop" else "▲"
            row += f" {arrow} {highlight.previous_grade}→{highlight.grade}"
            row = paint(row, "41;97" if highlight.direction == "drop" else "42;30")
        lines.append(row)
    if not keys:
        lines.append("(waiting for the first aggregates…)")
    else:
        level = next(iter(state.reports.values())).difference_confidence if state.reports else 0.95
        capacity = state.aggregates[keys[0]].capacity
        lines += [""] + [paint(line, DIM) for line in legend(level, capacity)]
    lines += render_suites(state, paint, colour)
    if state.changes:
        lines += ["", "grade changes (newest last):"]
        for _, change in state.changes[-6:]:
            arrow = "▼ drop" if change.direction == "drop" else "▲ rise"
            lines.append(
                f"  {change.experiment_id}/{change.tier}: {change.previous_grade} → {change.grade} "
                f"({arrow}, composite median {change.composite_median:.3f}, run {change.run_id})"
            )
    return "\n".join(lines)
