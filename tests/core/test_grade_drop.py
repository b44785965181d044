"""The grade-drop signal: sustained over runs, measured against the tier's own level, with
hysteresis; silent on the real runs' noise and quick on a real drop."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from schemas.common import Grade
from stream_app.commands.synthetic import GradeDrop, synthetic_lines
from stream_app.core.config import CoreConfig
from stream_app.core.grade_drop import DropParameters, GradeDropState, letter_of_points
from stream_app.core.ingest import Rejection, evaluate_run
from stream_app.core.keys import tier_key
from stream_app.core.tier_state import TierState
from stream_app.core.window import WindowEntry

PARAMS = DropParameters()  # 30 runs, half-life 100, two letters


def feed(
    state: GradeDropState, grades: str, params: DropParameters | None = None
) -> tuple[GradeDropState, list[int]]:
    """Observe each grade; return the final state and the 1-based positions where it dropped."""
    onsets = []
    for i, grade in enumerate(grades, start=1):
        before = state.dropped
        state = state.observe(grade, params or PARAMS)  # type: ignore[arg-type]
        if state.dropped and not before:
            onsets.append(i)
    return state, onsets


def test_a_sustained_drop_is_flagged_on_the_thirtieth_low_window() -> None:
    state, onsets = feed(GradeDropState(), "A" * 40 + "F" * 30)
    assert onsets == [70]
    assert state.sustained(PARAMS) == "F"
    assert state.level == pytest.approx(4.0)


def test_noise_is_not_a_drop() -> None:
    # A bad window, or 29 in a row, leaves a better one among the last 30.
    assert feed(GradeDropState(), "A" * 40 + ("F" * 29 + "A") * 5)[1] == []
    # One letter down is within the noise of real tiers: not a drop.
    assert feed(GradeDropState(), "A" * 40 + "B" * 300)[1] == []
    # A tier that usually grades C has no two letters below it but F: D is not a drop.
    assert feed(GradeDropState(), "C" * 40 + "D" * 300)[1] == []
    assert feed(GradeDropState(), "C" * 40 + "F" * 30)[1] == [70]


def test_nothing_before_the_tier_has_a_history() -> None:
    state, _ = feed(GradeDropState(), "F" * 29)
    assert state.sustained(PARAMS) is None
    assert state.level is None
    state, _ = feed(GradeDropState(), "A" * 30)
    assert (state.sustained(PARAMS), state.level) == ("A", None)  # no window aged out yet
    state = state.observe("A", PARAMS)
    assert state.level == 4.0


def test_the_drop_ends_when_the_median_window_is_back_and_the_level_did_not_learn_it() -> None:
    dropped, _ = feed(GradeDropState(), "A" * 40 + "F" * 30)
    level = dropped.level
    still, _ = feed(dropped, "A" * 15 + "F" * 0)  # 15 F and 15 A: the lower median is F
    assert still.dropped
    assert still.level == level  # the F windows that aged out did not enter the level
    back = still.observe("A", PARAMS)  # 14 F, 16 A: median A
    assert not back.dropped
    # A long drop stays one page: no end and new start while it lasts.
    long_drop, onsets = feed(GradeDropState(), "A" * 40 + "F" * 500)
    assert onsets == [70]
    assert long_drop.dropped
    assert long_drop.level == pytest.approx(4.0)


def test_the_level_forgets_with_its_half_life() -> None:
    """A one-letter change is not a drop: the level moves to it. Of the 301 windows aged in
    (31 A, then 270 B), the A ones keep weights d**270 … d**300 (d = 0.5 ** (1 / 100))."""
    state, _ = feed(GradeDropState(), "A" * 31 + "B" * 300)
    d = PARAMS.decay
    assert state.level == pytest.approx(3 + (d**270 - d**301) / (1 - d**301))
    assert letter_of_points(state.level) == "B"


@given(st.text(alphabet="ABCDF", max_size=120))
def test_state_round_trips_through_json(grades: str) -> None:
    state, _ = feed(GradeDropState(), grades)
    again = GradeDropState.from_state(json.loads(json.dumps(state.to_state())))
    assert again == state
    assert again.observe("F", PARAMS) == state.observe("F", PARAMS)


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"r": "AX", "s": 1.0, "w": 1.0, "d": False},
        {"r": "A", "s": -1.0, "w": 1.0, "d": False},
        {"r": "A", "s": float("nan"), "w": 1.0, "d": False},
        {"r": "A", "s": 1.0, "w": True, "d": False},
        {"r": "A", "s": 1.0, "w": 1.0, "d": 1},
        {"r": "A", "s": 1.0, "d": False},
        # Numbers no run of observe() makes: dropped without a level (it would page forever,
        # since a dropped tier's level does not learn), a level above A (4 points a window).
        {"r": "", "s": 0.0, "w": 0.0, "d": True},
        {"r": "A" * 30, "s": 1e299, "w": 1.0, "d": False},
        {"r": "A", "s": 4.5, "w": 1.0, "d": False},
    ],
)
def test_bad_states_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="grade-drop state"):
        GradeDropState.from_state(bad)


def test_the_tier_state_keeps_the_signal_in_its_changelog_record() -> None:
    config = CoreConfig()
    state = TierState.empty("e", "T1", config.window_size)
    for entry in entries(45, passed=lambda i: i < 40):
        state.apply(entry, config)
    assert state.drop.recent == "A" * 29 + "D"  # 5 of the last 10 runs failed: median 0.7
    raw = state.to_json()
    loaded = TierState.from_json("e", "T1", config.window_size, raw)
    assert loaded.drop == state.drop
    assert loaded.aggregate(config) == state.aggregate(config)
    # A state stored before the signal existed loads with an empty one.
    old = json.loads(raw)
    del old["drop"]
    assert TierState.from_json("e", "T1", 10, json.dumps(old).encode()).drop == GradeDropState()
    with pytest.raises(ValueError, match="grade-drop state"):
        TierState.from_json("e", "T1", 10, json.dumps({**old, "drop": {"r": 5}}).encode())


def test_a_failing_aggregate_leaves_the_signal_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    config = CoreConfig()
    state = TierState.empty("e", "T1", config.window_size)
    runs = entries(41, passed=lambda i: True)
    for entry in runs[:-1]:
        state.apply(entry, config)
    before = state.drop

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("stream_app.core.tier_state.aggregate_window", broken)
    with pytest.raises(RuntimeError):
        state.apply(runs[-1], config)
    assert state.drop == before


def entries(count: int, passed: object) -> list[WindowEntry]:
    out = []
    for i in range(count):
        line = json.dumps(
            {
                "schema_version": 1,
                "run_id": f"r{i:04d}",
                "experiment_id": "e",
                "tier": "T1",
                "model": "claude-sonnet-4-5",
                "passed": passed(i),  # type: ignore[operator]
                "judgment": {"summary": {"weighted_score": 0.9}},
                "tokens": {"input": 1, "output": 1, "cache_creation": 0, "cache_read": 0},
                "cost_usd": 0.1,
                "started_at": datetime(2026, 1, 1, 0, 0, tzinfo=UTC).isoformat(),
                "completed_at": datetime(2026, 1, 1, 0, i // 60, i % 60, tzinfo=UTC).isoformat(),
            }
        ).encode()
        run = evaluate_run(line, CoreConfig())
        assert not isinstance(run, Rejection)
        out.append(WindowEntry.from_run(run.model_dump(mode="json")))
    return out


def scenario_onsets(seed: int, runs_per_tier: int, drop: GradeDrop | None) -> dict[str, list[int]]:
    """Each tier's drop onsets, in the tier's own run count, for a synthetic scenario."""
    config = CoreConfig()
    tiers: dict[str, TierState] = {}
    counts: dict[str, int] = {}
    onsets: dict[str, list[int]] = {}
    for line in synthetic_lines(runs_per_tier * 21, experiments=3, seed=seed, drop=drop):
        run = evaluate_run(line, config)
        assert not isinstance(run, Rejection)
        key = tier_key(run.experiment_id, run.tier)
        state = tiers.setdefault(key, TierState.empty(run.experiment_id, run.tier, 10))
        before = state.drop.dropped
        state.apply(WindowEntry.from_run(run.model_dump(mode="json")), config, False)
        counts[key] = counts.get(key, 0) + 1
        if state.drop.dropped and not before:
            onsets.setdefault(key, []).append(counts[key])
    return onsets


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_stationary_scenario_never_drops(seed: int) -> None:
    """20 minutes of 21 noisy tiers at 1 run/s (the real runs' pass rates and scores), three
    seeds; prometheus/tests/scenarios.test.yml holds a full hour through Prometheus's rules."""
    assert scenario_onsets(seed, 1200, None) == {}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_injected_drop_is_flagged_within_forty_runs_and_nothing_else(seed: int) -> None:
    drop = GradeDrop(experiment="synthetic-01", tier="T5", after=0.5)
    onsets = scenario_onsets(seed, 400, drop)
    assert list(onsets) == [tier_key("synthetic-01", "T5")]
    (first, *_) = onsets[tier_key("synthetic-01", "T5")]
    assert 200 + 30 <= first <= 200 + 40


def test_letters_of_points() -> None:
    grades: list[Grade] = [letter_of_points(p) for p in (4.0, 3.6, 3.4, 2.5, 1.2, 0.4, 0.0)]
    assert grades == ["A", "A", "B", "B", "D", "F", "F"]


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("grade_drop_steps", 4.0),  # an A tier's level is a mean below 4: it would never page
        ("grade_drop_steps", 0.5),
        ("grade_level_half_life_runs", 1e-300),  # the level would be the last window alone
        ("grade_drop_runs", 0),
    ],
)
def test_settings_that_would_silence_the_alert_are_refused(setting: str, value: float) -> None:
    with pytest.raises(ValidationError, match=setting):
        CoreConfig(**{setting: value})


def test_the_strictest_drop_setting_still_pages_for_an_a_tier_falling_to_f() -> None:
    params = DropParameters(runs=30, steps=3.5)
    _, onsets = feed(GradeDropState(), "A" * 40 + "B" + "A" * 40 + "F" * 30, params)
    assert onsets == [111]
