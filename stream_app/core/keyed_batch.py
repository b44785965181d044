"""One batch of events folded into per-key state, with each event's failure kept to that event.

The worker and `replay` fold runs into tier windows (and aggregates into experiments) a batch at a
time and finish each key once per batch. An exception must cost only the event that caused it:

- `step` raising on an event (it must be atomic: the state is unchanged when it raises) fails
  that event; the batch goes on.
- `load` gives a key's stored state, or None for a key with none (it starts from `fresh`).
  `load` raising (a stored state that cannot be read) quarantines the key: it starts again from
  `fresh`, and the caller resets the store and reports the bad state.
- `finish` raising on a key (its aggregate) redoes that key's events one at a time from its state
  before the batch, finishing after each, so that the event whose step made it fail is found and
  failed, and the others of the key are kept. Finishing after every event is what `finish` once
  per key saves; this slow path runs only for a key that failed.

Pure: no I/O; the caller turns failures into dead letters.
"""

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
    """What a batch did. `states` and `results` hold every key an event changed, in the order
    the batch first touched them; `steps` each event's step (with its index) per key."""

    states: dict[K, S] = field(default_factory=dict)
    results: dict[K, R] = field(default_factory=dict)
    steps: dict[K, list[tuple[int, P]]] = field(default_factory=dict)
    failures: list[EventFailure] = field(default_factory=list)
    quarantined: list[StateFailure[K]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class KeyedFold(Generic[K, S, E, P, R]):
    """How events change a key's state. `step` returns (whether the state changed, what
    happened) and must leave the state unchanged when it raises."""

    load: Callable[[K], S | None]
    fresh: Callable[[K], S]
    copy: Callable[[S], S]
    step: Callable[[S, E], tuple[bool, P]]
    finish: Callable[[K, S], R]

    def run(self, events: Sequence[tuple[K, E]]) -> FoldedBatch[K, S, P, R]:
        """Fold `events` (key, event) into their keys' states; see the module's docstring."""
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
