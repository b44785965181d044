"""The demo's live table (and `status EXPERIMENT`): a tier whose window is not full yet says so
in place of its grade; a full window shows its grade, and "DROPPED" or "warming" for its drop
detectors. Every tier shows its runs and pass rate over all of them with an interval, and its
difference from the baseline with an interval, marked `~` when not significant."""

from __future__ import annotations

import re

from stream_app.core.replay import replay_lines
from stream_app.service.settings import load_settings
from stream_app.terminal.live_table import LiveState, render
from tests.helpers import encode, make_event


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
