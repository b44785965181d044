"""Issue 9: one event's exception costs that event only, in the fold the worker and replay share."""

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import stream_app.core.tier_state as tier_state_module
from stream_app.core.config import CoreConfig
from stream_app.core.keyed_batch import FoldedBatch, KeyedFold, key_parts, key_slices
from stream_app.core.replay import Replay
from stream_app.core.tier_state import TierState, fold_runs
from stream_app.core.window import WindowEntry, to_epoch_us
from tests.helpers import encode, make_event

CONFIG = CoreConfig()
START = datetime(2026, 1, 1, tzinfo=UTC)


def entry(i: int, score: float = 0.5) -> WindowEntry:
    at = to_epoch_us(START + timedelta(minutes=i))
    return WindowEntry(at, f"run-{i:03d}", 1.0, score, 0.5, 60.0, 0.5, 0.75)


class Boom(Exception):
    pass


def counting_fold(
    poison: set[str], finish_poison: set[str]
) -> KeyedFold[str, list[str], str, str, int]:
    """A toy fold: state is a list of event names; `step` raises on `poison`, `finish` raises
    while the state holds any of `finish_poison`."""

    def step(state: list[str], event: str) -> tuple[bool, str]:
        if event in poison:
            raise Boom(event)
        if event in state:
            return False, "duplicate"
        state.append(event)
        return True, "added"

    def finish(key: str, state: list[str]) -> int:
        if finish_poison & set(state):
            raise Boom(f"finish {key}")
        return len(state)

    return KeyedFold(lambda _: None, lambda _: [], list, step, finish)


def test_a_step_that_raises_fails_only_its_event() -> None:
    fold = counting_fold({"b2"}, set())
    out = fold.run([("a", "a1"), ("b", "b1"), ("b", "b2"), ("a", "a2"), ("b", "b3")])
    assert [f.index for f in out.failures] == [2]
    assert out.states == {"a": ["a1", "a2"], "b": ["b1", "b3"]}
    assert out.results == {"a": 2, "b": 2}


def test_a_finish_that_raises_finds_the_guilty_event_and_keeps_the_rest() -> None:
    fold = counting_fold(set(), {"b2"})
    out = fold.run([("a", "a1"), ("b", "b1"), ("b", "b2"), ("a", "a2"), ("b", "b3")])
    assert [f.index for f in out.failures] == [2]
    assert str(out.failures[0].error) == "finish b"
    assert out.states == {"a": ["a1", "a2"], "b": ["b1", "b3"]}
    assert out.results == {"a": 2, "b": 2}
    assert [i for i, _ in out.steps["b"]] == [1, 4]


def test_a_key_whose_every_event_fails_is_not_saved() -> None:
    out = counting_fold({"x1", "x2"}, set()).run([("x", "x1"), ("x", "x2"), ("y", "y1")])
    assert "x" not in out.states
    assert out.states == {"y": ["y1"]}


def test_a_state_that_cannot_be_loaded_is_quarantined_and_started_fresh() -> None:
    def load(key: str) -> list[str] | None:
        if key == "bad":
            raise ValueError("garbage")
        return ["old"] if key == "good" else None

    base = counting_fold(set(), set())
    fold = KeyedFold(load, base.fresh, base.copy, base.step, base.finish)
    out = fold.run([("bad", "n1"), ("good", "n2")])
    assert [(q.key, str(q.error)) for q in out.quarantined] == [("bad", "garbage")]
    assert out.states == {"bad": ["n1"], "good": ["old", "n2"]}


def test_apply_is_atomic_when_the_grade_step_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    state = TierState.empty("e", "T1", 3)
    for i in range(3):
        state.apply(entry(i), CONFIG)
    before = state.to_json()

    def explode(*_: Any) -> float:
        raise Boom("median")

    monkeypatch.setattr(tier_state_module, "median", explode)
    with pytest.raises(Boom):
        state.apply(entry(9), CONFIG)  # evicts the oldest, then raises
    assert state.to_json() == before


def poison_aggregate(monkeypatch: pytest.MonkeyPatch, run_id: str) -> None:
    """Make aggregating any window that holds `run_id` raise, as a defect in the core would."""
    real = tier_state_module.TierState.aggregate

    def aggregate(self: TierState, config: CoreConfig) -> Any:
        if any(e.run_id == run_id for e in self.window.entries):
            raise OverflowError("poisoned")
        return real(self, config)

    monkeypatch.setattr(tier_state_module.TierState, "aggregate", aggregate)


def test_fold_runs_dead_letters_only_the_run_whose_aggregate_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    poison_aggregate(monkeypatch, "run-002")
    runs = [("e/T1", entry(i)) for i in range(5)] + [("e/T2", entry(7))]
    out = fold_runs(runs, lambda _: None, CONFIG)
    assert [(f.index, type(f.error).__name__) for f in out.failures] == [(2, "OverflowError")]
    assert [e.run_id for e in out.states["e/T1"].window.entries] == [
        "run-000",
        "run-001",
        "run-003",
        "run-004",
    ]
    assert out.results["e/T1"].run_ids == ["run-000", "run-001", "run-003", "run-004"]
    assert out.results["e/T2"].runs == 1


def test_replay_rejects_the_poisoned_run_with_its_line_and_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    poison_aggregate(monkeypatch, "poison")
    lines = [
        encode(make_event(run_id="a")),
        encode(make_event(run_id="poison", completed_at="2026-01-05T09:02:00Z")),
        b"not json",
        encode(make_event(run_id="b", completed_at="2026-01-05T09:03:00Z")),
    ]
    replay = Replay(CONFIG)
    replay.feed_lines(lines)
    report = replay.report()
    assert [(r.line, r.reason) for r in report.rejected] == [
        (2, "processing_error"),
        (3, "invalid_json"),
    ]
    assert report.rejected[0].detail == {"stage": "window", "error": "OverflowError: poisoned"}
    assert report.tiers[0].run_ids == ["a", "b"]


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b'{"v": 2, "window": [], "grade": null}',
        b'{"v": 1, "window": {}, "grade": null}',
        b'{"v": 1, "window": [], "grade": "Z"}',
        b'{"v": 1, "window": [[1, "r", 1, 1, 1, 1, 1]], "grade": null}',
        b'{"v": 1, "window": [[-1, "r", 1, 1, 1, 1, 1, 1]], "grade": null}',
        b'{"v": 1, "window": [[1e20, "r", 1, 1, 1, 1, 1, 1]], "grade": null}',
        b'{"v": 1, "window": [[253402300800000000, "r", 1, 1, 1, 1, 1, 1]], "grade": null}',
        b'{"v": 1, "window": [[1, 7, 1, 1, 1, 1, 1, 1]], "grade": null}',
        b'{"v": 1, "window": [[1, "r", "x", 1, 1, 1, 1, 1]], "grade": null}',
        b'{"v": 1, "window": [[1, "r", NaN, 1, 1, 1, 1, 1]], "grade": null}',
        b'{"v": 1, "window": [[1, "r", -Infinity, 1, 1, 1, 1, 1]], "grade": null}',
        b'{"v": 1, "window": [[1, "r", true, 1, 1, 1, 1, 1]], "grade": null}',
        b"[" * 100_000,
    ],
)
def test_a_stored_state_that_is_not_one_raises_value_error_on_load(raw: bytes) -> None:
    with pytest.raises(ValueError, match="tier state"):
        TierState.from_json("e", "T1", 10, raw)


def test_a_loaded_state_aggregates() -> None:
    state = TierState.empty("e", "T1", 10)
    state.apply(entry(1), CONFIG)
    loaded = TierState.from_json("e", "T1", 10, state.to_json())
    assert loaded.aggregate(CONFIG) == state.aggregate(CONFIG)
    failed = TierState.empty("e", "T1", 10)
    failed.apply(entry(2)._replace(cost_of_pass=math.inf), CONFIG)
    assert TierState.from_json("e", "T1", 10, failed.to_json()).window.entries[0].cost_of_pass == (
        math.inf
    )


def test_the_largest_run_fits_its_row_budget() -> None:
    """MAX_ROW_BYTES bounds what a run takes in a stored state (the settings check the window
    against the broker's message limit with it): a 200-character run id of the characters that
    write longest, and the longest numbers."""
    from stream_app.core.tier_state import MAX_ROW_BYTES

    for char in ("\x01", "😀", '"'):
        state = TierState.empty("e", "T1", 2)
        long = entry(1)._replace(run_id=char * 200, cost_usd=1.2345678901234567e-300)
        state.apply(long, CONFIG)
        state.apply(entry(2)._replace(run_id=char * 199 + "x"), CONFIG)
        empty = len(TierState.empty("e", "T1", 2).to_json())
        assert (len(state.to_json()) - empty) / 2 <= MAX_ROW_BYTES, char


def test_a_huge_integer_in_a_stored_state_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="out of range"):
        TierState.from_json(
            "e",
            "T1",
            10,
            b'{"v":2,"window":[[1,"r",1'
            + b"0" * 400
            + b',1,1,1,1,1,null,null,"",false]],"grade":null}',
        )


@given(
    st.lists(
        st.tuples(st.sampled_from("abcd"), st.sampled_from(["e1", "e2", "e3", "p1", "f1"])),
        max_size=25,
    )
)
def test_a_batch_folded_a_key_at_a_time_is_the_batch_folded_at_once(
    events: list[tuple[str, str]],
) -> None:
    """The suite hop folds a key slice at a time, with turns for the other hops in between:
    every state, result, step and failure (at the batch's own index) as one fold makes them."""
    toy = counting_fold({"p1"}, {"f1"})

    def load(key: str) -> list[str] | None:
        if key == "d":
            raise Boom("unreadable")
        return None

    fold = KeyedFold(load, toy.fresh, toy.copy, toy.step, toy.finish)
    whole = fold.run(events)
    sliced: FoldedBatch[str, list[str], str, int] = FoldedBatch()
    for indices in key_slices(events):
        sliced.take(fold.run([events[i] for i in indices]), indices)
    assert sliced.states == whole.states
    assert sliced.results == whole.results
    assert sliced.steps == whole.steps
    assert [(f.index, str(f.error)) for f in sliced.failures] == [
        (f.index, str(f.error)) for f in whole.failures
    ]
    assert [q.key for q in sliced.quarantined] == [q.key for q in whole.quarantined]


@given(
    st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from("xyz")), max_size=40),
    st.integers(1, 5),
)
def test_a_batch_in_parts_keeps_each_group_whole_and_each_part_within_its_keys(
    events: list[tuple[str, str]], max_keys: int
) -> None:
    """Keys `a1`.. grouped by their letter: every event in exactly one part, in the batch's
    order within it; a group's keys in one part; a part over `max_keys` keys only when it is
    one group; and folding the parts one after another gives the batch's fold."""
    keyed = [(f"{group}{tail}", tail) for group, tail in events]
    parts = key_parts(keyed, lambda key: key[0], max_keys)
    assert sorted(i for part in parts for i in part) == list(range(len(keyed)))
    assert all(part == sorted(part) and part for part in parts)
    part_of = {keyed[i][0][0]: n for n, part in enumerate(parts) for i in part}
    for n, part in enumerate(parts):
        assert {part_of[keyed[i][0][0]] for i in part} == {n}
        keys = {keyed[i][0] for i in part}
        groups = {key[0] for key in keys}
        assert len(keys) <= max_keys or len(groups) == 1
    # parts as full as the order of first meeting allows: a part and the next group overflow
    firsts = list(dict.fromkeys(key[0] for key, _ in keyed))
    for n in range(len(parts) - 1):
        keys = {keyed[i][0] for i in parts[n]}
        following = next(g for g in firsts if part_of[g] == n + 1)
        assert len(keys) + len({k for k, _ in keyed if k[0] == following}) > max_keys
    fold = counting_fold(set(), set())
    whole = fold.run(keyed)
    states: dict[str, list[str]] = {}
    for part in parts:
        states.update(fold.run([keyed[i] for i in part]).states)
    assert states == whole.states


def test_an_empty_batch_has_no_parts() -> None:
    assert key_parts([], str, 3) == []
