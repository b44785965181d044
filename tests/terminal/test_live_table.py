"""The demo's live table (and `status EXPERIMENT`): a tier whose window is not full yet says so
in place of its grade; a full window shows its grade, and "DROPPED" or "warming" for its drop
detectors. Every tier shows its runs and pass rate over all of them with an interval, and its
difference from the baseline with an interval, marked `~` when not significant. Below the
experiments, one row per suite tier (every experiment of one agent): DROPPED when its detectors
paged, else how far its evidence is on the way to a page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from schemas.suites import SuiteTier
from stream_app.core.replay import replay_lines
from stream_app.service.settings import load_settings
from stream_app.terminal.live_table import SUITE_LEGEND, LiveState, render
from tests.helpers import KafkaRecord as Record
from tests.helpers import encode, make_event
from tests.suite_reports import suite_tier as suite_report


def state_of(
    runs_per_tier: dict[str, int], failing: frozenset[str] = frozenset(), reports: bool = False
) -> LiveState:
    """The state after `runs_per_tier` runs (those of the `failing` tiers fail), with the
    experiment's latest cross-tier report when `reports`."""
    lines = [
        encode(
            make_event(
                run_id=f"exp/{tier}/{n}",
                tier=tier,
                passed=tier not in failing,
                completed_at=f"2026-01-05T{9 + n // 60:02d}:{n % 60:02d}:00Z",
            )
        )
        for tier, count in runs_per_tier.items()
        for n in range(count)
    ]
    report = replay_lines(lines, load_settings())
    state = LiveState()
    for agg in report.tiers:
        state.aggregates[(agg.experiment_id, agg.tier)] = agg
    if reports:
        for cross in report.cross_tier:
            state.reports[cross.experiment_id] = cross
    return state


def row(text: str, tier: str) -> str:
    return next(line for line in text.splitlines() if re.match(rf"exp\s+{tier}\s", line))


def header(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("experiment"))


def test_a_window_not_full_is_filling() -> None:
    text = render(state_of({"T0": 10, "T1": 3}), "header", colour=False)
    full, filling = row(text, "T0"), row(text, "T1")
    assert re.match(r"exp\s+T0\s+10 B warming\s", full), full
    assert "filling" not in full
    assert re.match(r"exp\s+T1\s+3 filling 3/10\s", filling), filling
    assert " B " not in filling


def test_runs_are_every_run_of_the_tier_not_the_window() -> None:
    text = render(state_of({"T0": 60}), "header", colour=False)
    assert re.match(r"exp\s+T0\s+60 B\s", row(text, "T0")), row(text, "T0")


def test_columns_stay_aligned() -> None:
    text = render(state_of({"T0": 60, "T1": 3, "T2": 20}, reports=True), "header", colour=False)
    head = header(text)
    for tier in ("T0", "T1", "T2"):
        line = row(text, tier)
        # Each column ends where its heading does, whatever the grade cell holds.
        assert line.index("0.925") + len("0.925") == head.index("composite") + len("composite")
        assert line.index("]") + 1 == head.index("pass % [interval]") + len("pass % [interval]")
        assert len(line) == len(head), line


def test_filling_in_colour_is_dim_and_full_grades_keep_their_colour() -> None:
    text = render(state_of({"T0": 60, "T1": 4, "T2": 20}), "header", colour=True)
    assert "\x1b[2mfilling 4/10" in text
    assert "\x1b[36mB" in text  # B's colour, as before
    assert "\x1b[36mB\x1b[0m \x1b[2mwarming\x1b[0m" in text


def test_a_tier_warming_up_its_detectors_says_so_until_they_run() -> None:
    """The detectors learn from drop_warmup_runs runs (50), each once it has left the window
    (ten runs later), before they watch."""
    text = render(state_of({"T0": 59, "T1": 60}), "", colour=False)
    assert re.match(r"exp\s+T0\s+59 B warming\s", row(text, "T0")), row(text, "T0")
    assert re.match(r"exp\s+T1\s+60 B\s+0\.925", row(text, "T1")), row(text, "T1")


def test_the_pass_rate_over_all_runs_has_its_interval() -> None:
    state = state_of({"T0": 60, "T1": 60}, failing=frozenset({"T1"}))
    text = render(state, "", colour=False)
    interval = state.aggregates[("exp", "T0")].cumulative.pass_rate_interval
    assert f" 100.0 [{100 * interval.low:.1f}, 100.0] " in row(text, "T0")
    assert " 0.0 [0.0, 8.9] " in row(text, "T1")


def test_a_dropped_tier_says_so() -> None:
    """45 passing runs set the tier's reference; the failing ones after make its pass-rate
    detector page: the signal TierDropped pages on, shown next to the grade."""
    lines = [
        encode(
            make_event(
                run_id=f"exp/T2/{n}",
                tier="T2",
                passed=n < 45,
                completed_at=f"2026-01-05T{9 + n // 60:02d}:{n % 60:02d}:00Z",
            )
        )
        for n in range(80)
    ]
    report = replay_lines(lines, load_settings())
    state = LiveState()
    for agg in report.tiers:
        state.aggregates[(agg.experiment_id, agg.tier)] = agg
    assert re.match(r"exp\s+T2\s+80 F DROPPED\s", row(render(state, "", colour=False), "T2"))
    assert "\x1b[1;31mDROPPED" in render(state, "", colour=True)
    assert "DROPPED" not in row(render(state_of({"T2": 80}), "", colour=False), "T2")


def test_the_difference_from_the_baseline_with_its_interval_and_significance() -> None:
    """T1 always fails where the baseline always passes: significantly worse. T2 passes like
    the baseline but has had 5 runs: its interval holds 0, marked `~`."""
    state = state_of({"T0": 60, "T1": 60, "T2": 5}, failing=frozenset({"T1"}), reports=True)
    report = state.reports["exp"]
    t1, t2 = report.pass_rate_difference["T1"], report.pass_rate_difference["T2"]
    assert t1.significant
    assert not t2.significant
    text = render(state, "", colour=False)
    worse = f"-100.0 [-100.0, {100 * t1.high:+.1f}]"
    assert row(text, "T1").split(worse)[1].startswith("    "), row(text, "T1")  # no mark
    assert f" +0.0 [{100 * t2.low:+.1f}, {100 * t2.high:+.1f}] ~ " in row(text, "T2")
    # The numbers line up whether or not the mark follows them.
    assert row(text, "T1").index(worse) + len(worse) == row(text, "T2").index(" ~ ")


def test_the_difference_in_colour_is_red_when_worse_and_dim_when_not_significant() -> None:
    state = state_of({"T0": 60, "T1": 60, "T2": 5}, failing=frozenset({"T1"}), reports=True)
    text = render(state, "", colour=True)
    assert re.search(r"\x1b\[31m\s*-100\.0 \[", text)
    assert re.search(r"\x1b\[2m\s*\+0\.0 \[[^\x1b]* ~\x1b\[0m", text)


def test_the_baseline_row_says_baseline() -> None:
    text = render(state_of({"T0": 10, "T1": 10}, reports=True), "", colour=False)
    assert re.search(r"\]\s+baseline\s+—\s", row(text, "T0")), row(text, "T0")
    assert "baseline" not in row(text, "T1")


def test_no_report_yet_or_no_baseline_run_shows_a_dash() -> None:
    no_report = render(state_of({"T0": 10, "T1": 10}), "", colour=False)
    assert re.search(r"\]\s+—\s+—\s", row(no_report, "T1")), row(no_report, "T1")
    assert re.search(r"\]\s+—\s+—\s", row(no_report, "T0")), row(no_report, "T0")
    no_baseline = state_of({"T1": 10, "T2": 10}, reports=True)
    assert no_baseline.reports["exp"].pass_rate_difference == {}
    text = render(no_baseline, "", colour=False)
    assert re.search(r"\]\s+—\s+—\s", row(text, "T2")), row(text, "T2")


def test_the_legend_says_what_the_mark_and_the_intervals_mean() -> None:
    text = render(state_of({"T0": 10, "T1": 10}, reports=True), "", colour=False)
    legend = text.split("\n\n")[2]
    assert "~ = not significant" in legend
    assert "95%" in legend
    assert "anytime-valid" in legend
    assert "all at once" in legend
    assert "warming" in legend
    assert "DROPPED" in legend
    assert "(waiting" in render(LiveState(), "", colour=False)


def test_the_table_fits_120_columns_with_a_grade_change() -> None:
    from datetime import UTC, datetime

    from schemas.grade_change import GradeChange

    state = state_of({"T0": 60, "T1": 60, "T2": 5}, failing=frozenset({"T1"}), reports=True)
    state.add_change(
        GradeChange(
            experiment_id="exp",
            tier="T1",
            previous_grade="B",
            grade="F",
            direction="drop",
            composite_median=0.425,
            at=datetime(2026, 1, 5, tzinfo=UTC),
            run_id="exp/T1/59",
        ),
        now=0.0,
    )
    text = render(state, "", colour=False, now=1.0)
    assert row(text, "T1").endswith(" ▼ B→F")
    assert max(len(line) for line in text.splitlines()) <= 120


def suite_tier(
    suite: str = "claude",
    tier: str = "T2",
    *,
    evidence: tuple[float, float] = (0.42, 0.1),
    **fields: Any,
) -> SuiteTier:
    pass_rate_evidence, score = evidence
    return suite_report(
        suite, tier, evidence={"pass_rate": pass_rate_evidence, "score": score}, **fields
    )


def suite_record(report: SuiteTier) -> Record:
    key = f"{report.suite}/{report.tier}".encode()
    return Record("suite-tiers", report.model_dump_json().encode(), key)


def section(text: str) -> list[str]:
    """The lines of the suite section, its heading first; none without one."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("suite ")]
    if not starts:
        return []
    rows = lines[starts[0] :]
    return rows[: rows.index("")]


def suite_rows(text: str) -> list[str]:
    """The heading and each suite tier's first row (its pass rate's)."""
    return [line for line in section(text) if not COMPOSITE_ROW.match(line)]


def composite_rows(text: str) -> list[str]:
    """Each suite tier's second row: its mean composite's."""
    return [line for line in section(text) if COMPOSITE_ROW.match(line)]


COMPOSITE_ROW = re.compile(r" {19}comp ")


def test_a_suite_tier_shows_below_the_experiments() -> None:
    state = state_of({"T0": 10, "T1": 10}, reports=True)
    state.add("suite_tiers", suite_record(suite_tier()))
    assert state.suites == {("claude", "T2"): suite_tier()}
    text = render(state, "header", colour=False)
    heading, *rows = suite_rows(text)
    assert re.match(
        r"suite\s+tier\s+pass % \[interval\]\s+vs baseline\s+covers\s+runs\s+drop detectors$",
        heading,
    ), heading
    assert rows == [
        f"{'claude':<18} T2   {'60.0 [50.0, 70.0]':>19} {'+4.0 [-2.0, +10.0] ~':>24} "
        f"{'3 experiments paired':<22} {120:>7}  42 % to a page",
    ]
    # the mean composite under the pass rate, its difference under the pass rate's
    assert composite_rows(text) == [
        f"{'':<18} comp {'70.0 [60.0, 80.0]':>19} {'+3.0 [-1.0, +7.0] ~':>24}"
    ]
    lines = text.splitlines()
    assert lines.index(heading) > lines.index(row(text, "T1"))
    assert lines.index(heading) > max(
        i for i, line in enumerate(lines) if "(alert TierDropped)" in line
    )
    legend = text.split(heading)[1]
    assert "a suite is every experiment of one agent" in legend
    assert "paired by experiment" in legend
    assert "DROPPED = its detectors paged (alert SuiteTierDropped)" in legend
    assert "comp: the same for its mean composite score" in legend
    assert max(len(line) for line in lines) <= 120


def test_a_dropped_suite_tier_says_so() -> None:
    state = LiveState()
    state.add("suite_tiers", suite_record(suite_tier(dropped=True, evidence=(1.3, 0.2))))
    [row_] = suite_rows(render(state, "", colour=False))[1:]
    assert re.match(r"claude\s+T2\s+.+\s+3 experiments paired\s+120 DROPPED$", row_), row_
    assert "% to a page" not in row_
    assert "\x1b[1;31mDROPPED\x1b[0m" in render(state, "", colour=True)


def test_a_suite_tier_short_of_a_page_shows_how_far_rounded_down() -> None:
    state = LiveState()
    state.add("suite_tiers", suite_record(suite_tier(evidence=(0.2, 0.996))))
    state.add(
        "suite_tiers", suite_record(suite_tier(tier="T3", experiments=1, evidence=(0.0, 0.0)))
    )
    state.add(
        "suite_tiers", suite_record(suite_tier(tier="T0", experiments=1, evidence=(0.0, 0.0)))
    )
    rows = suite_rows(render(state, "", colour=False))[1:]
    assert rows[1].endswith("  99 % to a page"), rows[1]  # the larger, not rounded up to a page
    assert re.match(r"claude\s+T3\s+.+\s+1 experiment paired\s+120\s+0 % to a page$", rows[2])
    assert re.match(r"claude\s+T0\s+60.0 \[50.0, 70.0\]\s+baseline\s+1 experiment\s+120", rows[0])


def test_a_suite_tier_not_yet_paired_shows_a_dash() -> None:
    state = LiveState()
    state.add(
        "suite_tiers",
        suite_record(
            suite_tier(
                experiments=0,
                pass_rate=None,
                difference=None,
                composite=None,
                composite_difference=None,
            )
        ),
    )
    text = render(state, "", colour=False)
    [row_] = suite_rows(text)[1:]
    assert re.match(r"claude\s+T2\s+—\s+—\s+0 experiments paired\s+120", row_), row_
    assert re.match(r" +comp +— +—$", composite_rows(text)[0])


def test_a_significant_suite_difference_is_coloured_by_its_sign() -> None:
    state = LiveState()
    state.add("suite_tiers", suite_record(suite_tier(difference=(-0.1, -0.15, -0.05))))
    text = render(state, "", colour=True)
    assert "\x1b[31m" in text
    assert "-10.0 [-15.0, -5.0]" in text


def test_a_suite_tombstone_removes_its_row_and_the_last_one_the_section() -> None:
    state = state_of({"T0": 10})
    state.add("suite_tiers", suite_record(suite_tier()))
    state.add("suite_tiers", suite_record(suite_tier(tier="T3")))
    state.add("suite_tiers", Record("suite-tiers", None, b"claude/T2"))
    assert list(state.suites) == [("claude", "T3")]
    assert len(suite_rows(render(state, "", colour=False))) == 2
    state.add("suite_tiers", Record("suite-tiers", None, b"claude/T3"))
    assert state.suites == {}
    assert suite_rows(render(state, "", colour=False)) == []


def test_no_suite_section_without_suites() -> None:
    text = render(state_of({"T0": 10, "T1": 10}, reports=True), "", colour=False)
    assert suite_rows(text) == []
    assert "SuiteTierDropped" not in text
    assert "suite" not in render(LiveState(), "", colour=False)


def test_suite_tiers_are_sorted_by_suite_then_numeric_tier() -> None:
    state = LiveState()
    for suite, tier in [("gpt", "T1"), ("claude", "T10"), ("claude", "T2"), ("claude", "T0")]:
        state.add("suite_tiers", suite_record(suite_tier(suite, tier)))
    rows = suite_rows(render(state, "", colour=False))[1:]
    assert [r.split()[:2] for r in rows] == [
        ["claude", "T0"],
        ["claude", "T2"],
        ["claude", "T10"],
        ["gpt", "T1"],
    ]


def test_a_suite_name_is_printable_and_cut_to_its_column() -> None:
    state = LiveState()
    state.add("suite_tiers", suite_record(suite_tier(suite="evil\x1b[2J")))
    state.add("suite_tiers", suite_record(suite_tier(suite="x" * 40)))
    text = render(state, "", colour=False)
    assert "\x1b" not in text
    _, evil, long = suite_rows(text)
    assert len(composite_rows(text)) == 2
    assert evil.startswith("evil\\x1b[2J ")
    assert long.startswith("x" * 18 + " T2 ")
    assert len(evil) == len(long)


def test_a_suite_tier_with_a_name_that_is_no_tier_does_not_stop_the_table() -> None:
    state = LiveState()
    state.add("suite_tiers", suite_record(suite_tier(tier="weird")))
    state.add("suite_tiers", suite_record(suite_tier(tier="T1")))
    rows = suite_rows(render(state, "", colour=False))[1:]
    assert [r.split()[1] for r in rows] == ["T1", "weird"]


def test_a_record_that_is_not_a_suite_tier_is_refused() -> None:
    state = state_of({"T0": 10})
    aggregate = state.aggregates[("exp", "T0")].model_dump_json().encode()
    for value in (aggregate, b"{oops", b'"claude"'):
        with pytest.raises(ValidationError):
            state.add("suite_tiers", Record("suite-tiers", value, b"claude/T2"))
    with pytest.raises(ValidationError):  # and a suite tier is no aggregate
        state.add("aggregates", suite_record(suite_tier()))
    assert state.suites == {}
    assert list(state.aggregates) == [("exp", "T0")]


def test_tombstones_retire_only_the_keys_of_their_own_kind() -> None:
    state = state_of({"T0": 10}, reports=True)
    state.add("suite_tiers", suite_record(suite_tier(suite="exp", tier="T0")))
    state.add("aggregates", Record("tier-aggregates", None, b"exp/T0"))
    assert state.aggregates == {}
    assert list(state.suites) == [("exp", "T0")]
    assert list(state.reports) == ["exp"]
    state.add("cross_tier", Record("cross-tier-reports", None, b"exp"))
    assert state.reports == {}
    assert list(state.suites) == [("exp", "T0")]


def test_the_suite_legend_says_one_experiment_as_the_detectors_do() -> None:
    """The legend's "a suite of one experiment never pages" is `MIN_EXPERIMENTS` (not imported
    by the table: it would load the detectors)."""
    from stream_app.core.suite.statistics import MIN_EXPERIMENTS

    assert MIN_EXPERIMENTS == 2
    assert any("a suite of one experiment never pages" in line for line in SUITE_LEGEND)


def test_a_tier_no_source_prices_says_unpriced_not_a_cost() -> None:
    lines = [
        encode(make_event(run_id=f"exp/T1/{n}", tier="T1", model="mystery-9", cost_usd=None))
        for n in range(3)
    ]
    report = replay_lines([encode(make_event(run_id="exp/T0/0")), *lines], load_settings())
    state = LiveState()
    for agg in report.tiers:
        state.aggregates[(agg.experiment_id, agg.tier)] = agg
    text = render(state, "header", colour=False)
    assert row(text, "T1").rstrip().endswith("unpriced"), row(text, "T1")
    assert row(text, "T0").rstrip().endswith("$0.5000"), row(text, "T0")  # its event's cost
