"""The demo's live view: what the output topics say, as a terminal table. Pure rendering of a
`LiveState` that the demo feeds from `tier-aggregates`, `cross-tier-reports` and `grade-changes`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.aggregates import TierAggregate
from schemas.common import tier_sort_key
from schemas.cross_tier import CrossTierReport
from schemas.grade_change import GradeChange
from stream_app.core.keys import split_tier_key

HIGHLIGHT_S = 15.0
GRADE_COLOURS = {"A": "32", "B": "36", "C": "33", "D": "35", "F": "31"}
DIM = "2"
GRADE_WIDTH = 12  # "filling 9/10"; wider capacities push the row, not the grade out


@dataclass
class LiveState:
    """The latest output per key, so the table can be redrawn from scratch at every refresh."""

    aggregates: dict[tuple[str, str], TierAggregate] = field(default_factory=dict)
    reports: dict[str, CrossTierReport] = field(default_factory=dict)
    changes: list[tuple[float, GradeChange]] = field(default_factory=list)

    def retire(self, key: str, tier: bool) -> None:
        """A tombstone's key: a retired tier (`experiment/tier`) or experiment."""
        if tier:
            self.aggregates.pop(split_tier_key(key), None)
        else:
            self.reports.pop(key, None)

    def add_change(self, change: GradeChange, now: float | None = None) -> None:
        """Remember a grade change and when it arrived, to highlight it for a while."""
        self.changes.append((now if now is not None else time.monotonic(), change))
        del self.changes[:-50]


def _grade_cell(agg: TierAggregate, paint: Callable[[str, str], str]) -> str:
    """The grade of a full window, with "DROPPED" while the tier's drop detectors (what
    `TierDropped` pages on) say it dropped; a window still filling says so instead, since its
    grade is of fewer runs than the grade changes are about."""
    if agg.runs < agg.capacity:
        text = f"filling {agg.runs}/{agg.capacity}"
        if agg.drop.dropped:
            return paint(f"{text + ' DROPPED':<{GRADE_WIDTH}}", GRADE_COLOURS["F"])
        return paint(f"{text:<{GRADE_WIDTH}}", DIM)
    text = f"{agg.grade} DROPPED" if agg.drop.dropped else agg.grade
    return paint(f"{text:<{GRADE_WIDTH}}", GRADE_COLOURS[agg.grade])


def _money(value: float) -> str:
    return "never passes" if math.isinf(value) else f"${value:.4f}"


def render(state: LiveState, header: str, colour: bool, now: float | None = None) -> str:
    """The live table as text: tiers with their grades, cross-tier uplift, recent changes."""
    now = now if now is not None else time.monotonic()

    def paint(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if colour else text

    recent: dict[tuple[str, str], GradeChange] = {}
    for at, change in state.changes:
        if now - at <= HIGHLIGHT_S:
            recent[(change.experiment_id, change.tier)] = change
    lines = [header, ""]
    columns = (
        f"{'experiment':<18} {'tier':<5} {'runs':>5} {'grade':<{GRADE_WIDTH}} {'composite':>9} "
        f"{'pass rate':>9} {'cost of pass':>13} {'uplift':>8}"
    )
    lines.append(paint(columns, "1") if colour else columns)
    keys = sorted(state.aggregates, key=lambda k: (k[0], tier_sort_key(k[1])))
    for experiment, tier in keys:
        agg = state.aggregates[(experiment, tier)]
        report = state.reports.get(experiment)
        uplift = report.tier_uplift.get(tier) if report else None
        uplift_text = f"{uplift:+.1%}" if uplift is not None else "—"
        grade = _grade_cell(agg, paint)
        row = (
            f"{experiment[:18]:<18} {tier:<5} {agg.runs:>5} {grade} "
            f"{agg.composite_score.median:>9.3f} {agg.pass_rate.mean:>9.0%} "
            f"{_money(agg.cost_of_pass.median):>13} {uplift_text:>8}"
        )
        highlight = recent.get((experiment, tier))
        if highlight is not None:
            arrow = "▼" if highlight.direction == "drop" else "▲"
            row += f"  {arrow} {highlight.previous_grade}→{highlight.grade}"
            row = paint(row, "41;97" if highlight.direction == "drop" else "42;30")
        lines.append(row)
    if not keys:
        lines.append("(waiting for the first aggregates…)")
    if state.changes:
        lines += ["", "grade changes (newest last):"]
        for _, change in state.changes[-6:]:
            arrow = "▼ drop" if change.direction == "drop" else "▲ rise"
            lines.append(
                f"  {change.experiment_id}/{change.tier}: {change.previous_grade} → {change.grade} "
                f"({arrow}, composite median {change.composite_median:.3f}, run {change.run_id})"
            )
    return "\n".join(lines)
