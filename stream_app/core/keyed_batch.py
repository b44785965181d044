"""One batch of events folded into per-key state, with each event's failure kept to that event.

The worker and `replay` both fold with this code, a batch at a time and each key finished once
per batch, so they reject the same runs (docs/delivery.md, 'What is promised'). Pure: no I/O;
the caller turns failures into dead letters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K")
S = TypeVar("S")
E = TypeVar("E")
P = TypeVar("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class EventFailure:
    """The event at `index` of the batch raised `error` (in `step` or `finish`)."""

    index: int
    error: Exception


@dataclass(frozen=True, slots=True)
class StateFailure(Generic[K]):
    """The stored state of `key` could not be loaded: it was replaced by a fresh one."""

    key: K
    error: Exception


@dataclass(slots=True)
class FoldedBatch(Generic[K, S, P, R]):
    """What a batch did. `states` and `results` hold every key an event changed; `steps` each
    event's step (with its index) per key; `failures` in the order of their events."""

    states: dict[K, S] = field(default_factory=dict)
    results: dict[K, R] = field(default_factory=dict)
    steps: dict[K, list[tuple[int, P]]] = field(default_factory=dict)
    failures: list[EventFailure] = field(default_factory=list)
    quarantined: list[StateFailure[K]] = field(default_factory=list)

    def take(self, part: FoldedBatch[K, S, P, R], indices: Sequence[int]) -> None:
        """Add the fold of a key slice of this batch (`key_slices`), the events at `indices`:
        its event indices become the batch's."""
        self.states.update(part.states)
        self.results.update(part.results)
        for key, steps in part.steps.items():
            self.steps[key] = [(indices[i], info) for i, info in steps]
        failures = [EventFailure(indices[f.index], f.error) for f in part.failures]
        self.failures = sorted([*self.failures, *failures], key=lambda f: f.index)
        self.quarantined.extend(part.quarantined)


def key_slices(events: Sequence[tuple[K, E]]) -> list[list[int]]:
    """The indices of `events` per key, keys in the order the batch first meets them. A key's
    events change only its state, so folding each slice apart and taking the parts
    (`FoldedBatch.take`) gives the batch's fold (its keys perhaps in another order), with turns
    for other work in between."""
    slices: dict[K, list[int]] = {}
    for index, (key, _) in enumerate(events):
        slices.setdefault(key, []).append(index)
    return list(slices.values())


def key_parts(
    events: Sequence[tuple[K, E]], group_of: Callable[[K], object], max_keys: int
) -> list[list[int]]:
    """The indices of `events` in parts of whole groups of keys (`group_of`: an experiment's
    tiers, say), each part holding at most `max_keys` keys unless one group alone holds more,
    groups in the order the batch first meets them and each part's indices in the batch's
    order. Every key's events stay in one part, so folding the parts one after another folds
    each key as the whole batch would; a worker that finishes each part before the next holds
    only one part's states and outputs at once (a backlog of many one-run tiers)."""
    if len({key for key, _ in events}) <= max_keys:  # the usual batch: one part, no grouping
        return [list(range(len(events)))] if events else []
    groups: dict[object, dict[K, None]] = {}
    for key, _ in events:
        groups.setdefault(group_of(key), {})[key] = None
    part_of: dict[K, int] = {}
    size = part = 0
    for keys in groups.values():
        if size and size + len(keys) > max_keys:
            part, size = part + 1, 0
        size += len(keys)
        for key in keys:
            part_of[key] = part
    parts: list[list[int]] = [[] for _ in range(part + 1)] if events else []
    for index, (key, _) in enumerate(events):
        parts[part_of[key]].append(index)
    return parts


@dataclass(frozen=True, slots=True)
class KeyedFold(Generic[K, S, E, P, R]):
    """How events change a key's state, and what each kind of failure costs.

    - `step` returns (whether the state changed, what happened); it must be atomic: the state is
      unchanged when it raises, and only that event fails.
    - `load` gives the stored state or None (then `fresh`); when it raises, the key is quarantined
      and starts from `fresh` (the caller resets the store and reports the bad state).
    - `finish` runs once per changed key; when it raises, the key's events are redone one at a
      time from its state before the batch, finishing after each, to fail only the culprit."""

    load: Callable[[K], S | None]
    fresh: Callable[[K], S]
    copy: Callable[[S], S]
    step: Callable[[S, E], tuple[bool, P]]
    finish: Callable[[K, S], R]

    def run(self, events: Sequence[tuple[K, E]]) -> FoldedBatch[K, S, P, R]:
        """Fold `events` (key, event) into their keys' states; failures as the class says."""
        out: FoldedBatch[K, S, P, R] = FoldedBatch()
        working: dict[K, S] = {}
        before: dict[K, S] = {}
        kept: dict[K, list[tuple[int, E]]] = {}
        changed: dict[K, None] = {}  # ordered set
        for index, (key, event) in enumerate(events):
            state = working.get(key)
            if state is None:
                state = self._load(key, out)
                working[key] = state
                before[key] = self.copy(state)
                kept[key] = []
                out.steps[key] = []
            try:
                did_change, info = self.step(state, event)
            except Exception as exc:
                out.failures.append(EventFailure(index, exc))
                continue
            kept[key].append((index, event))
            out.steps[key].append((index, info))
            if did_change:
                changed[key] = None
        for key in changed:
            try:
                out.results[key] = self.finish(key, working[key])
                out.states[key] = working[key]
            except Exception:
                self._one_at_a_time(out, key, before[key], kept[key])
        out.failures.sort(key=lambda f: f.index)
        return out

    def _load(self, key: K, out: FoldedBatch[K, S, P, R]) -> S:
        try:
            state = self.load(key)
        except Exception as exc:
            out.quarantined.append(StateFailure(key, exc))
            state = None
        return self.fresh(key) if state is None else state

    def _one_at_a_time(
        self, out: FoldedBatch[K, S, P, R], key: K, before: S, events: list[tuple[int, E]]
    ) -> None:
        """The slow path of a key whose finish failed: step and finish after every event."""
        state = self.copy(before)
        steps: list[tuple[int, P]] = []
        result: tuple[R] | None = None
        for index, event in events:
            snapshot = self.copy(state)
            try:
                did_change, info = self.step(state, event)
                if did_change:
                    result = (self.finish(key, state),)
            except Exception as exc:
                out.failures.append(EventFailure(index, exc))
                state = snapshot
                continue
            steps.append((index, info))
        out.steps[key] = steps
        if result is not None:
            out.results[key] = result[0]
            out.states[key] = state
