"""The demo's live table (and `status EXPERIMENT`): a tier whose window is not full yet says so
in place of its grade; a full window shows its grade."""

from __future__ import annotations

import re

from helpers import encode, make_event
from stream_app.commands.live_table import LiveState, render
from stream_app.core.replay import replay_lines
from stream_app.service.settings import load_settings


def state_of(runs_per_tier: dict[str, int]) -> LiveState:
    lines = [
        encode(
            make_event(
                run_id=f"exp/{tier}/{n}",
                tier=tier,
                completed_at=f"2026-01-05T09:{n + 1:02d}:00Z",
            )
        )
        for tier, count in runs_per_tier.items()
        for n in range(count)
    ]
    report = replay_lines(lines, load_settings())
    state = LiveState()
    for agg in report.tiers:
        state.aggregates[(agg.experiment_id, agg.tier)] = agg
    return state


def row(text: str, tier: str) -> str:
    return next(line for line in text.splitlines() if re.match(rf"exp\s+{tier}\s", line))


def test_a_window_not_full_is_filling() -> None:
    text = render(state_of({"T0": 10, "T1": 3}), "header", colour=False)
    full, filling = row(text, "T0"), row(text, "T1")
    assert re.match(r"exp\s+T0\s+10 B\s", full), full
    assert "filling" not in full
    assert re.match(r"exp\s+T1\s+3 filling 3/10\s", filling), filling
    assert " B " not in filling


def test_columns_stay_aligned() -> None:
    text = render(state_of({"T0": 10, "T1": 3}), "header", colour=False)
    header = next(line for line in text.splitlines() if line.startswith("experiment"))
    for tier in ("T0", "T1"):
        line = row(text, tier)
        # The composite column ends where its heading does, whatever the grade cell holds.
        assert line.index("0.925") + len("0.925") == header.index("composite") + len("composite")


def test_filling_in_colour_is_dim_and_full_grades_keep_their_colour() -> None:
    text = render(state_of({"T0": 10, "T1": 4}), "header", colour=True)
    assert "\x1b[2mfilling 4/10" in text
    assert "\x1b[36mB" in text  # B's colour, as before


def test_a_dropped_tier_says_so() -> None:
    """40 passing runs set the tier's level (A); 30 failing ones more make every window of its
    last 30 runs F: the signal TierGradeDropped pages on, shown next to the grade."""
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
    assert re.match(r"exp\s+T2\s+10 F DROPPED\s", row(render(state, "", colour=False), "T2"))
    assert "DROPPED" not in row(render(state_of({"T2": 80}), "", colour=False), "T2")
