"""The suite's detectors: a function of the set of runs given (not of how partitions interleave
them), the same kept run by run as made again from the shares, repeats dropped by their tier's
incarnation and sequence, retirement, and pages for a regression of every experiment or a few."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_app.core.config import CoreConfig
from stream_app.core.drop_detector import odds_ratios
from stream_app.core.suite.arithmetic import POOLED_SHARE, SPARSE_PI
from stream_app.core.suite.evidence import SIZE, TierFeed
from stream_app.core.suite.message import MAX_EVIDENCE_UNITS, SuiteRun
from stream_app.core.suite.share import RUNS, ExperimentShare
from stream_app.core.suite.state import SuiteState
from stream_app.core.suite.window import HOUR_US, WINDOW_HOURS
from stream_app.core.window import WindowEntry

DESIGN = CoreConfig().drop_design
RATIOS = odds_ratios(DESIGN)
DAY_US = 24 * HOUR_US

Stream = tuple[str, list[SuiteRun]]


def sparse_of(state: SuiteState, threshold: float) -> list[list[float]]:
    """The sparse detector's statistic at each end hour, as `status` reads it."""
    return state.statistics.sparse_values(threshold, state.clock.first_whole_day(), state.hours_of)


def experiment_runs(
    rnd: random.Random,
    experiment: str,
    nights: int,
    pass_rate: float,
    *,
    fall_on: int | None,
    offset_s: int = 0,
) -> Stream:
    """One experiment's runs in its own order, 5 a night a minute apart from 01:00 and
    `offset_s`, through its tier's suite feed."""
    feed, out = TierFeed(), list[SuiteRun]()
    for night in range(nights):
        p = pass_rate
        if fall_on is not None and night >= fall_on:
            p = p * 0.33 / (1 - p + p * 0.33)
        for k in range(5):
            passed = rnd.random() < p
            score = min(1.0, max(0.0, rnd.gauss(0.85 if passed else 0.3, 0.1)))
            at = night * DAY_US + 3_600_000_000 + (offset_s + k * 60) * 1_000_000
            run = WindowEntry(at, f"{experiment}/{night}/{k}", float(passed), score, 0, 0, 0, 0)
            feed, evidence = feed.observe(run, RATIOS)
            out.append(
                SuiteRun(experiment, feed.epoch, len(out) + 1, at, evidence, passed, float(passed))
            )
    return experiment, out


def streams_of(seed: int, experiments: int, nights: int, fall_on: int | None) -> list[Stream]:
    """Experiments run one after another through the night, ten minutes each."""
    rnd = random.Random(seed)
    return [
        experiment_runs(
            rnd, f"task-{e:02d}", nights, rnd.betavariate(7, 3), fall_on=fall_on, offset_s=600 * e
        )
        for e in range(experiments)
    ]


def suite_of(streams: list[Stream], rnd: random.Random) -> SuiteState:
    """The streams interleaved at random, each experiment's own order kept."""
    state, cursors = SuiteState(), [0] * len(streams)
    live = [i for i, (_, runs) in enumerate(streams) if runs]
    while live:
        i = rnd.choice(live)
        name, runs = streams[i]
        state.add(name, runs[cursors[i]])
        cursors[i] += 1
        if cursors[i] == len(runs):
            live.remove(i)
    return state


def stored(state: SuiteState) -> dict[str, Any]:
    """Every share as the suite table stores it, by experiment."""
    return {name: state.shares[name].to_state() for name in sorted(state.shares)}


def same(a: SuiteState, b: SuiteState) -> None:
    """Equal shares, and equal statistics and status."""
    assert stored(a) == stored(b)
    assert a.status(DESIGN) == b.status(DESIGN)  # first: it makes what a removal left stale
    assert a.statistics.sparse.terms == b.statistics.sparse.terms
    pooled, sparse = DESIGN.threshold / POOLED_SHARE, DESIGN.threshold / (1 - POOLED_SHARE)
    assert a.statistics.pooled_values(pooled) == b.statistics.pooled_values(
        pooled
    )  # status's, kept
    assert sparse_of(a, sparse) == sparse_of(b, sparse)
    for state in (a, b):  # counted as they change, as a count over every share says
        assert state.runs == sum(s.runs for s in state.shares.values())
        hours = {n: sum(map(state.clock.holds, s.hours)) for n, s in state.shares.items()}
        assert state.watched.hours == {n: c for n, c in hours.items() if c}
        assert state.watched.experiments == len(state.watched.hours)


def test_the_state_does_not_depend_on_how_experiments_interleave() -> None:
    streams = streams_of(1, 12, 30, fall_on=22)
    first = suite_of(streams, random.Random(1))
    for seed in (2, 3):
        same(suite_of(streams, random.Random(seed)), first)
    # each experiment's runs in a block, in reverse order of experiments: the same again
    blocked = SuiteState()
    for name, runs in reversed(streams):
        for run in runs:
            blocked.add(name, run)
    same(blocked, first)
    # and what run by run keeps equals what the shares make again
    same(SuiteState({n: s.copy() for n, s in first.shares.items()}), first)
    same(first.copy(), first)


def test_repeats_are_dropped_by_their_sequence() -> None:
    [(name, stream)] = streams_of(4, 1, 20, fall_on=None)
    once, twice = SuiteState(), SuiteState()
    for run in stream:
        once.add(name, run)
    for i, run in enumerate(stream):
        assert twice.add(name, run)
        assert not twice.add(name, run)  # redelivered
        if i:
            assert not twice.add(name, stream[i - 1])  # an older one, redelivered later
    same(twice, once)


def test_a_new_incarnation_is_taken_and_a_late_repeat_of_an_old_one_is_not() -> None:
    share = ExperimentShare()
    first = [SuiteRun("e", 11, seq, seq * HOUR_US, (0,) * SIZE, True, 1.0) for seq in (1, 2, 3)]
    again = [SuiteRun("e", 22, seq, (10 + seq) * HOUR_US, (0,) * SIZE, True, 1.0) for seq in (1, 2)]
    assert all(share.takes(run) for run in first)
    assert all(share.takes(run) for run in again)  # its tier started afresh
    assert (share.epoch, share.seq, share.runs, share.retired) == (22, 2, 5, (11,))
    assert not any(share.takes(run) for run in [*first, *again])  # repeats, late


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 40 * 24), st.integers(-3, 3)),
        min_size=1,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_windows_commute_and_run_by_run_equals_remade(
    runs: list[tuple[int, int, int]], rnd: random.Random
) -> None:
    """Runs far apart in time and out of time order: the shares and statistics are the same in
    any order of the experiments, and the same as made again from the shares."""
    streams: dict[str, list[SuiteRun]] = {}
    for experiment, hour, sign in runs:
        stream = streams.setdefault(f"e{experiment}", [])
        evidence = tuple(sign * (k + 1) * 2**30 for k in range(SIZE))
        stream.append(
            SuiteRun(f"e{experiment}", 1, len(stream) + 1, hour * HOUR_US, evidence, True, 1.0)
        )
    forward = suite_of(list(streams.items()), rnd)
    backward = SuiteState()
    for name, stream in reversed(list(streams.items())):
        for run in stream:
            backward.add(name, run)
    same(forward, backward)
    same(SuiteState({n: s.copy() for n, s in forward.shares.items()}), forward)
    for share in forward.shares.values():
        assert share.newest is not None
        assert all(h > share.newest - WINDOW_HOURS for h in share.hours)


def test_retiring_an_experiment_removes_its_share() -> None:
    streams = streams_of(7, 3, 20, fall_on=None)
    state = suite_of(streams, random.Random(0))
    assert state.remove("task-01")
    assert not state.remove("task-01")
    assert "task-01" not in state.shares
    without = suite_of([s for s in streams if s[0] != "task-01"], random.Random(5))
    same(state, without)
    assert state.status(DESIGN).experiments == 2


def test_a_regression_of_every_experiment_pages_the_night_it_happens() -> None:
    streams = streams_of(5, 40, 22, fall_on=20)
    state, paged_at = SuiteState(), None
    runs = sorted((r for _, s in streams for r in s), key=lambda r: r.completed_at_us)
    for run in runs:
        state.add(run.experiment_id, run)
        if paged_at is None and state.status(DESIGN).dropped:
            paged_at = run.completed_at_us // DAY_US
    assert paged_at == 20


def test_a_stationary_suite_does_not_page_and_one_experiment_never_does() -> None:
    streams = streams_of(6, 40, 60, fall_on=None)
    state = SuiteState()
    runs = sorted((r for _, s in streams for r in s), key=lambda r: r.completed_at_us)
    for t, run in enumerate(runs):
        state.add(run.experiment_id, run)
        if t % 25 == 0:
            assert not state.status(DESIGN).dropped
    assert state.status(DESIGN).experiments == 40
    # one experiment whose runs all fail: its own tier's business, not its suite's; the
    # suite's clock is its second newest experiment's, so there is no window yet
    alone = SuiteState()
    for k in range(300):
        alone.add("solo", SuiteRun("solo", 1, k + 1, k * HOUR_US, (10 * 2**32,) * SIZE, True, 1.0))
    status = alone.status(DESIGN)
    assert not status.dropped
    assert status.evidence == {"pass_rate": 0.0, "score": 0.0}
    assert alone.clock.top is None


def test_a_share_keeps_the_outcomes_of_its_runs() -> None:
    [(name, stream)] = streams_of(8, 1, 3, fall_on=None)
    state = SuiteState()
    for run in stream:
        state.add(name, run)
    share = state.shares[name]
    assert share.outcomes.runs == share.runs == 15
    assert share.outcomes.passes == sum(bool(r.passed) for r in stream)
    data = share.to_state()
    assert ExperimentShare.from_state(data).outcomes == share.outcomes
    del data["o"]  # no release stored a share without them
    with pytest.raises(ValueError, match="share"):
        ExperimentShare.from_state(data)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(q=-1),
        lambda d: d.update(r=[1, 2, 3, 4, 5]),
        lambda d: d.update(n=0),  # hours with no runs
        lambda d: d["h"].append(d["h"][0]),
        lambda d: d["h"].append([d["h"][0][0] + WINDOW_HOURS, *d["h"][0][1:]]),
        lambda d: d["h"][0].append(1),
        lambda d: d.update(extra=1),
        lambda d: d.update(r=[d["e"]]),  # its own incarnation retired: every run would drop
        lambda d: d.update(r=[5, 5]),
        lambda d: d["h"][0].__setitem__(1, 10**320),  # beyond any run's evidence
        lambda d: d["h"][0].__setitem__(1, (d["n"] + 1) * MAX_EVIDENCE_UNITS),
        lambda d: d["h"][0].__setitem__(0, -1),
        lambda d: d["h"][0].__setitem__(0, 2**63 // HOUR_US),
        lambda d: d["h"][0].__setitem__(-1, 0),  # an hour of no runs
        lambda d: d["h"][0].__setitem__(-1, d["n"] + 1),
        lambda d: d["h"][1].__setitem__(-1, d["n"] - d["h"][0][-1] + 1),  # more than all runs
        lambda d: d["h"][0].__setitem__(1, (d["h"][0][-1] + 1) * MAX_EVIDENCE_UNITS),
        lambda d: d.update(h=[]),  # runs, and no hour with them
        lambda d: d["o"].__setitem__(0, d["n"] + 1),  # more outcomes than runs
        lambda d: d["o"].__setitem__(0, d["n"] - 1),  # a run without its outcome
        lambda d: d["o"].__setitem__(1, d["n"] + 1),  # more passes than runs
        lambda d: d["o"].__setitem__(2, 0.2),  # a first run adds 1/4
        lambda d: d["o"].__setitem__(2, d["n"] + 0.5),  # a run adds at most 1
        lambda d: d["o"].__setitem__(2, 1),  # a spread is a float
        lambda d: d["o"].__setitem__(3, d["n"] + 1.0),  # composites are at most 1 a run
        lambda d: d["o"].__setitem__(4, -0.5),
        lambda d: d["o"].__setitem__(3, 1),  # a composite sum is a float
        lambda d: d["o"].__setitem__(5, d["o"][6] + 1),  # it started after its latest run
        lambda d: d["o"].__setitem__(6, d["o"][6] + 2 * HOUR_US),  # latest is not in its hours
        lambda d: d.update(o=d["o"][:5]),  # before the composites and the times
        lambda d: d["o"].__setitem__(0, True),
    ],
)
def test_a_stored_share_no_runs_make_is_refused(change: object) -> None:
    [(name, stream)] = streams_of(8, 1, 3, fall_on=None)
    state = SuiteState()
    for run in stream:
        state.add(name, run)
    data = state.shares[name].to_state()
    assert ExperimentShare.from_state(data).to_state() == data
    assert callable(change)
    change(data)
    with pytest.raises(ValueError, match="share"):
        ExperimentShare.from_state(data)


def by_definition(state: SuiteState) -> tuple[list[list[float]], list[list[float]]]:
    """Both statistics at every end hour, from the shares as docs/statistics.md defines them:
    a sum over change points (the window's hours with runs; its whole days with runs) of the
    change point's weight, the runs of the hour (day) with runs before it at most one a minute,
    1 for the first, times the evidence since it (the sparse one: per experiment, 1 - pi + pi
    e^L)."""
    assert state.clock.top is not None
    cells = {
        (name, h): c
        for name, s in state.shares.items()
        for h, c in s.hours.items()
        if state.clock.top - WINDOW_HOURS < h <= state.clock.top + 24
    }
    hours = sorted({h for _, h in cells})
    first_day = state.clock.top // 24 - 13

    def runs(hs: set[int] | list[int]) -> int:
        return sum(c[RUNS] for (_, h), c in cells.items() if h in hs)

    def log_e(names: set[str], start: int, end: int, i: int) -> float:
        return sum(c[i] for (n, h), c in cells.items() if n in names and start <= h <= end) / 2**32

    pooled = []
    for end in hours:
        weights = [1] + [max(1, min(runs([h]), 60)) for h in hours[:-1]]
        pooled.append(
            [
                sum(
                    w * math.exp(log_e(set(state.shares), h, end, i))
                    for w, h in zip(weights, hours, strict=False)
                    if h <= end
                )
                for i in range(SIZE)
            ]
        )
    days = sorted({h // 24 for h in hours if h // 24 >= first_day})
    sparse = []
    for end in (h for h in hours if h // 24 >= first_day):
        total = [0.0] * SIZE
        for k, j in enumerate(d for d in days if d <= end // 24):
            w = (
                1
                if not k
                else max(1, min(runs({h for h in hours if h // 24 == days[k - 1]}), 1440))
            )
            for i in range(SIZE):
                product = 1.0
                for name in state.shares:
                    product *= 1 - SPARSE_PI + SPARSE_PI * math.exp(log_e({name}, 24 * j, end, i))
                total[i] += w * product
        sparse.append(total)
    return pooled, sparse


def test_the_statistics_are_what_their_definition_says() -> None:
    """Kept run by run, as the worker does, both statistics equal the sums over change points
    docs/statistics.md states, each change point weighing the runs before it."""
    streams = streams_of(12, 5, 16, fall_on=12)
    state = suite_of(streams, random.Random(3))
    # a busy hour: its next hour's change point weighs 60, not its 90 runs
    at = 15 * DAY_US + 20 * HOUR_US
    for k in range(90):
        state.add("task-09", SuiteRun("task-09", 7, k + 1, at + k, (0,) * SIZE, True, 1.0))
    state.add("task-09", SuiteRun("task-09", 7, 91, at + HOUR_US, (2**32,) * SIZE, True, 1.0))
    pooled, sparse = by_definition(state)
    kept = (
        state.statistics.pooled_values(1e300),
        sparse_of(state, 1e300),
    )
    for got, want, rel in zip(kept, (pooled, sparse), (1e-9, 1e-6), strict=True):
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert a == pytest.approx(b, rel=rel)
    # with no evidence at all, a statistic is its change points' weights: the runs before
    calm = SuiteState()
    for hour in range(3):
        for k in range(100):
            for name in ("a", "b"):
                calm.add(
                    name,
                    SuiteRun(name, 1, 100 * hour + k + 1, hour * HOUR_US, (0,) * SIZE, True, 1.0),
                )
    assert [r[0] for r in calm.statistics.pooled_values(1e300)] == [1, 1 + 60, 1 + 60 + 60]


def test_a_share_whose_hours_lack_their_run_count_is_refused() -> None:
    """No release stored hours without their run count (docs/architecture.md, 'Stored
    formats'): such a share is not one some runs make."""
    [(name, stream)] = streams_of(8, 1, 3, fall_on=None)
    state = SuiteState()
    for run in stream:
        state.add(name, run)
    data = state.shares[name].to_state()
    assert all(row[-1] == 5 for row in data["h"])  # 5 runs a night, in one hour
    with pytest.raises(ValueError, match="hour"):
        ExperimentShare.from_state({**data, "h": [row[:-1] for row in data["h"]]})


def test_a_copy_and_its_original_change_apart() -> None:
    """A copy shares the shares it did not change with its original (copy-on-write): runs added
    to either, or an experiment removed, leave the other as it was."""
    streams = streams_of(9, 4, 6, fall_on=None)
    state = suite_of(streams, random.Random(0))
    before = stored(state)
    copy = state.copy()
    more = [
        SuiteRun(
            name, runs[-1].epoch, 100 + k, runs[-1].completed_at_us, (2**31,) * SIZE, True, 1.0
        )
        for k, (name, runs) in enumerate(streams)
    ]
    for run in more:
        assert copy.add(run.experiment_id, run)
    assert copy.remove("task-01")
    assert stored(state) == before
    same(state, SuiteState({n: s.copy() for n, s in state.shares.items()}))
    for run in more[:2]:
        assert state.add(run.experiment_id, run)
    assert copy.shares["task-02"].seq == 102
    assert state.shares["task-02"].seq < 100
    assert "task-01" in state.shares
    assert "task-01" not in copy.shares
    same(copy, SuiteState({n: s.copy() for n, s in copy.shares.items()}))


def test_retiring_many_experiments_at_once_makes_the_statistics_again_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker retires thousands of idle experiments in one message: the suite makes its
    statistics again once for all of them, not once each (which took minutes at 5,000)."""
    from stream_app.core.suite.message import SuiteMessage
    from stream_app.core.suite.state import fold_suite_items

    state = SuiteState()
    for e in range(300):
        state.add(f"e{e}", SuiteRun(f"e{e}", 1, 1, e * 60_000_000, (1,) * SIZE, True, 1.0))
    rebuilds = 0
    rebuild = SuiteState._rebuild

    def counted(self: SuiteState) -> None:
        nonlocal rebuilds
        rebuilds += 1
        rebuild(self)

    monkeypatch.setattr(SuiteState, "_rebuild", counted)
    retire = SuiteMessage("s", "T1", retired=tuple(f"e{e}" for e in range(299)))
    folded = fold_suite_items(
        [("s/T1", item) for item in retire.items], {"s/T1": state}.get, DESIGN
    )
    assert rebuilds <= 2
    assert folded.results["s/T1"].experiments == 1


def test_one_experiment_dated_years_ahead_does_not_blind_its_suite() -> None:
    """The suite's clock is its second newest experiment's: a run dated a year ahead (a wrong
    clock) leaves the window where the other experiments are, and their regression pages."""
    streams = streams_of(5, 40, 22, fall_on=20)
    state = SuiteState()
    future = SuiteRun(
        "task-00", streams[0][1][0].epoch, 10_000, 400 * DAY_US, (0,) * SIZE, True, 1.0
    )
    state.add("task-00", future)
    runs = sorted((r for _, s in streams for r in s), key=lambda r: r.completed_at_us)
    paged = False
    for run in runs:
        state.add(run.experiment_id, run)
        paged = paged or state.status(DESIGN).dropped
    assert paged
    assert state.clock.leader is not None
    assert state.clock.leader[0] == 400 * 24
    assert state.clock.top is not None
    assert state.clock.top < 22 * 24


def _nats(experiment: str, seq: int, hour: int, nats: float) -> SuiteRun:
    """A run of `experiment` at `hour` whose evidence is `nats` in every component."""
    return SuiteRun(experiment, 1, seq, hour * HOUR_US, (int(nats * 2**32),) * SIZE, True, 1.0)


def test_a_night_of_tasks_run_one_after_another_pages_on_its_own_runs() -> None:
    """Three tasks run in turn, an hour each, each with evidence no hour alone pages on: the
    suite pages on the night's last run, not when a later night moves its clock (the window
    reaches a day past the second newest experiment)."""
    state = SuiteState()
    for hour, experiment in enumerate(("a", "b", "c"), start=1):
        if experiment == "c":
            assert not state.status(DESIGN).dropped  # e^12 over two hours: below the threshold
        for k in range(6):
            state.add(experiment, _nats(experiment, k + 1, hour, 1.0))
    assert state.clock.top == 2
    assert state.status(DESIGN).dropped  # e^18 over the three hours


def test_a_run_dated_more_than_a_day_ahead_counts_once_another_experiment_is_near() -> None:
    state = SuiteState()
    for hour in range(48):
        state.add("a", _nats("a", hour + 1, hour, 0.0))
        state.add("b", _nats("b", hour + 1, hour, 0.0))
    state.add("c", _nats("c", 1, 47 + 25, 40.0))  # 25 hours past the clock (47)
    assert not state.status(DESIGN).dropped
    state.add("b", _nats("b", 49, 47 + 2, 0.0))
    assert state.status(DESIGN).dropped


def test_experiments_with_runs_only_in_the_windows_first_hours_are_watched() -> None:
    """MIN_EXPERIMENTS counts every experiment with runs in the window, those of its first,
    partial day too (whose hours the pooled detector counts)."""
    state = SuiteState()
    top = 24 * 100 + 20
    partial = top - WINDOW_HOURS + 1  # the window's first hour, before its first whole day
    for experiment in ("a", "b"):
        for k in range(40):
            state.add(experiment, _nats(experiment, k + 1, partial, 2.0))
        state.add(experiment, _nats(experiment, 41, top, 0.0))
    assert state.clock.top == top
    assert state.status(DESIGN).dropped
