"""The rolling window of one `(experiment_id, tier)`: the `capacity` greatest runs by
`(completed_at, run_id)` among every accepted run of that key.

A run whose `run_id` is already in the window is a duplicate; a run older than the window's oldest
while the window is full is late; both are ignored. The final window is therefore a pure function
of the *set* of events, whatever their order or repetition: redelivery after a crash is harmless.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final, NamedTuple

from schemas.run_metrics import RunMetrics

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def to_epoch_us(moment: datetime) -> int:
    """Exact integer microseconds since the epoch (aware datetimes only)."""
    return (moment - _EPOCH) // _MICROSECOND


def from_epoch_us(us: int) -> datetime:
    """The UTC datetime of `to_epoch_us`."""
    return _EPOCH + timedelta(microseconds=us)


class WindowEntry(NamedTuple):
    """What a window keeps of a run. Tuple order is the window order: (completed_at, run_id)."""

    completed_at_us: int
    run_id: str
    pass_rate: float
    impl_rate: float
    cost_usd: float
    duration_seconds: float
    cost_of_pass: float
    composite_score: float
    code_bleu: float | None = None  # optional metrics last: older 8-field states still load
    test_pass_rate: float | None = None

    @classmethod
    def from_metrics(cls, m: RunMetrics) -> WindowEntry:
        return cls(
            to_epoch_us(m.completed_at),
            m.run_id,
            m.pass_rate,
            m.impl_rate,
            m.cost_usd,
            m.duration_seconds,
            m.cost_of_pass,
            m.composite_score,
            m.code_bleu,
            m.test_pass_rate,
        )

    @classmethod
    def from_forwarded(cls, doc: dict[str, Any]) -> WindowEntry:
        """From the JSON of a `RunMetrics` this service produced itself (already validated once,
        at the edge): no second validation on the hot path. Infinite costs arrive as "Infinity"."""
        return cls(
            to_epoch_us(datetime.fromisoformat(doc["completed_at"])),
            doc["run_id"],
            doc["pass_rate"],
            doc["impl_rate"],
            doc["cost_usd"],
            doc["duration_seconds"],
            float(doc["cost_of_pass"]),
            doc["composite_score"],
            doc.get("code_bleu"),
            doc.get("test_pass_rate"),
        )

    @property
    def sort_key(self) -> tuple[int, str]:
        return self.completed_at_us, self.run_id


class AddOutcome(StrEnum):
    ADDED = "added"
    DUPLICATE = "duplicate"
    LATE = "late"


class TierWindow:
    """A bounded, ordered, duplicate-free set of runs (oldest first)."""

    __slots__ = ("_entries", "_ids", "capacity")

    def __init__(self, capacity: int, entries: Iterable[WindowEntry] = ()) -> None:
        if capacity < 1:
            raise ValueError("window capacity must be >= 1")
        self.capacity = capacity
        self._entries: list[WindowEntry] = []
        self._ids: set[str] = set()
        for entry in entries:
            self.add(entry)

    def add(self, entry: WindowEntry) -> AddOutcome:
        """Insert a run in order, evicting the oldest when over capacity."""
        return self.insert(entry)[0]

    def insert(self, entry: WindowEntry) -> tuple[AddOutcome, WindowEntry | None]:
        """`add`, also returning the run it evicted, so that `undo` can take the step back."""
        if entry.run_id in self._ids:
            return AddOutcome.DUPLICATE, None
        entries = self._entries
        key = entry.sort_key
        if len(entries) >= self.capacity and key < entries[0].sort_key:
            return AddOutcome.LATE, None
        bisect.insort(entries, entry, key=_sort_key)
        self._ids.add(entry.run_id)
        evicted = None
        if len(entries) > self.capacity:
            evicted = entries.pop(0)
            self._ids.discard(evicted.run_id)
        return AddOutcome.ADDED, evicted

    def undo(self, entry: WindowEntry, evicted: WindowEntry | None) -> None:
        """Take back an `insert` that returned ADDED (the newest change only)."""
        index = bisect.bisect_left(self._entries, entry.sort_key, key=_sort_key)
        del self._entries[index]
        self._ids.discard(entry.run_id)
        if evicted is not None:  # it was the oldest, so it goes back first
            self._entries.insert(0, evicted)
            self._ids.add(evicted.run_id)

    def copy(self) -> TierWindow:
        clone = TierWindow(self.capacity)
        clone._entries = list(self._entries)
        clone._ids = set(self._ids)
        return clone

    @property
    def entries(self) -> Sequence[WindowEntry]:
        """Oldest to newest."""
        return tuple(self._entries)

    @property
    def is_full(self) -> bool:
        return len(self._entries) >= self.capacity

    def __len__(self) -> int:
        return len(self._entries)

    def to_state(self) -> list[list[Any]]:
        """A JSON-friendly snapshot (one list per run, oldest first); see `from_state`."""
        return [list(e) for e in self._entries]

    @classmethod
    def from_state(cls, capacity: int, state: Iterable[Sequence[Any]]) -> TierWindow:
        """Rebuild a window; a smaller capacity than the snapshot's keeps the newest runs."""
        return cls(capacity, (WindowEntry(*row) for row in state))


def _sort_key(entry: WindowEntry) -> tuple[int, str]:
    return entry.completed_at_us, entry.run_id
