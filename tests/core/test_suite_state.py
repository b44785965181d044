"""The suite's detectors: a function of the set of runs given (not of how partitions interleave
them), repeats dropped by their tier's sequence, windows that commute, and pages for a
regression of every experiment or of a few."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_app.core.config import CoreConfig
from stream_app.core.drop_detector import DropState
from stream_app.core.suite_state import DAYS, HOUR_US, HOURS, SuiteRun, SuiteState

DESIGN = CoreConfig().drop_design
DAY_US = 24 * HOUR_US


def experiment_runs(
    rnd: random.Random, experiment: str, nights: int, pass_rate: float, *, fall_on: int | None
) -> list[SuiteRun]:
    """One experiment's runs in its own order, 5 a night, through its tier's own detectors."""
    drop, out, seq = DropState(), [], 0
    for night in range(nights):
        p = pass_rate
        if fall_on is not None and night >= fall_on:
            p = p * 0.33 / (1 - p + p * 0.33)
        for k in range(5):
            passed = float(rnd.random() < p)
            score = min(1.0, max(0.0, rnd.gauss(0.85 if passed else 0.3, 0.1)))
            seen = drop.observe_run(passed, score, "", DESIGN)
            drop, _ = drop.observe(passed, score, DESIGN)
            seq += 1
            if seen.contribution is not None:
                at = night * DAY_US + 3_600_000_000 + k * 60_000_000
                out.append(SuiteRun("agent", "T1", experiment, seq, at, seen.contribution))
    return out


def suite_of(streams: list[list[SuiteRun]], rnd: random.Random) -> SuiteState:
    """The streams interleaved at random, each experiment's own order kept."""
    state, cursors = SuiteState(), [0] * len(streams)
    live = [i for i, s in enumerate(streams) if s]
    while live:
        i = rnd.choice(live)
        state.add(streams[i][cursors[i]])
        cursors[i] += 1
        if cursors[i] == len(streams[i]):
            live.remove(i)
    return state


def streams_of(
    seed: int, experiments: int, nights: int, fall_on: int | None
) -> list[list[SuiteRun]]:
    rnd = random.Random(seed)
    return [
        experiment_runs(rnd, f"task-{e:02d}", nights, rnd.betavariate(7, 3), fall_on=fall_on)
        for e in range(experiments)
    ]


def test_the_state_does_not_depend_on_how_experiments_interleave() -> None:
    streams = streams_of(1, 12, 30, fall_on=22)
    first = suite_of(streams, random.Random(1))
    for seed in (2, 3):
        other = suite_of(streams, random.Random(seed))
        assert other.to_state() == first.to_state()
        assert other.status(DESIGN) == first.status(DESIGN)
    # each experiment's runs in a block, in reverse order of experiments: the same again
    blocked = SuiteState()
    for stream in reversed(streams):
        for run in stream:
            blocked.add(run)
    assert blocked.to_state() == first.to_state()


def test_repeats_are_dropped_by_their_sequence() -> None:
    [stream] = streams_of(4, 1, 20, fall_on=None)
    once, twice = SuiteState(), SuiteState()
    for run in stream:
        once.add(run)
    for i, run in enumerate(stream):
        assert twice.add(run)
        assert not twice.add(run)  # redelivered
        if i:
            assert not twice.add(stream[i - 1])  # an older one, redelivered later
    assert twice.to_state() == once.to_state()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40 * 24)), min_size=1, max_size=40))
def test_windows_commute_whatever_the_hours(runs: list[tuple[int, int]]) -> None:
    """Runs far apart in time: the buckets kept, and the runs in them, are the same in any
    order of the experiments."""
    streams: dict[int, list[SuiteRun]] = {}
    for experiment, hour in runs:
        stream = streams.setdefault(experiment, [])
        stream.append(
            SuiteRun("s", "T1", f"e{experiment}", len(stream) + 1, hour * HOUR_US, (1, -2, 3) * 2)
        )
    forward, backward = SuiteState(), SuiteState()
    for stream in streams.values():
        for run in stream:
            forward.add(run)
    for stream in reversed(list(streams.values())):
        for run in stream:
            backward.add(run)
    assert forward.to_state() == backward.to_state()
    top = max(hour for _, hour in runs)
    assert all(h > top - HOURS for h in forward.hours)
    assert all(d > top // 24 - DAYS for b in forward.days.values() for d in b)


def test_a_regression_of_every_experiment_pages_the_night_it_happens() -> None:
    streams = streams_of(5, 40, 22, fall_on=20)
    state, paged_at = SuiteState(), None
    for t, run in enumerate(
        sorted((r for s in streams for r in s), key=lambda r: r.completed_at_us)
    ):
        state.add(run)
        if paged_at is None and t % 20 == 0 and state.status(DESIGN).dropped:
            paged_at = run.completed_at_us // DAY_US
    assert paged_at is not None
    assert paged_at <= 21


def test_a_stationary_suite_does_not_page() -> None:
    streams = streams_of(6, 40, 60, fall_on=None)
    state = SuiteState()
    for t, run in enumerate(
        sorted((r for s in streams for r in s), key=lambda r: r.completed_at_us)
    ):
        state.add(run)
        if t % 50 == 0:
            assert not state.status(DESIGN).dropped
    assert state.status(DESIGN).experiments == 40


def test_retiring_an_experiment_removes_its_strata() -> None:
    streams = streams_of(7, 3, 20, fall_on=None)
    state = suite_of(streams, random.Random(0))
    state.remove("task-01")
    assert "task-01" not in state.seen
    assert "task-01" not in state.days
    assert state.status(DESIGN).experiments == 2
