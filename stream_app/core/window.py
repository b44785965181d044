"""The rolling window of one `(experiment_id, tier)`: the `capacity` greatest runs by
`(completed_at, run_id)` among every accepted run of that key.

A run whose `run_id` is already in the window is a duplicate; a run older than the window's oldest
while the window is full is late; both are ignored. The final window is therefore a pure function
of the *set* of events, whatever their order or repetition: redelivery after a crash is harmless.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from operator import itemgetter
from typing import Any, Final, NamedTuple

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
    cost_usd: float | None  # None: the run is unpriced
    duration_seconds: float
    cost_of_pass: float | None
    composite_score: float
    code_bleu: float | None = None  # optional metrics last: older 8-field states still load
    test_pass_rate: float | None = None
    stratum: str = ""
    """The run's subtest ("" without one): whose reference it is measured against."""
    learns: bool = False
    """Whether it joins its stratum's reference when it leaves the window (decided on arrival)."""
    suite: str = ""
    """Where its suite evidence goes; not stored with the window (`to_state` leaves it out)."""

    @classmethod
    def from_run(cls, run: Mapping[str, Any]) -> WindowEntry:
        """The one way a run enters a window: from its `RunMetrics` as JSON, as the validate stage
        forwards it and replay hands it over (so both take the same path, byte for byte). No second
        validation on the hot path; an infinite cost of pass arrives as "Infinity"."""
        return cls(
            to_epoch_us(datetime.fromisoformat(run["completed_at"])),
            run["run_id"],
            run["pass_rate"],
            run["impl_rate"],
            run["cost_usd"],
            run["duration_seconds"],
            None if run["cost_of_pass"] is None else float(run["cost_of_pass"]),
            run["composite_score"],
            run.get("code_bleu"),
            run.get("test_pass_rate"),
            run.get("subtest") or "",
            False,
            run.get("suite") or "",
        )


STORED_FIELDS: Final = len(WindowEntry._fields) - 1
"""A stored row holds every field but the suite."""
window_order: Final = itemgetter(0, 1)
"""A run's place in its window: (completed_at_us, run_id), the first two fields of an entry."""


class AddOutcome(StrEnum):
    """What adding a run did to its window: only an added run changes anything."""

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
        if len(entries) >= self.capacity and window_order(entry) < window_order(entries[0]):
            return AddOutcome.LATE, None
        bisect.insort(entries, entry, key=window_order)
        self._ids.add(entry.run_id)
        evicted = None
        if len(entries) > self.capacity:
            evicted = entries.pop(0)
            self._ids.discard(evicted.run_id)
        return AddOutcome.ADDED, evicted

    def undo(self, entry: WindowEntry, evicted: WindowEntry | None) -> None:
        """Take back an `insert` that returned ADDED (the newest change only)."""
        index = bisect.bisect_left(self._entries, window_order(entry), key=window_order)
        del self._entries[index]
        self._ids.discard(entry.run_id)
        if evicted is not None:  # it was the oldest, so it goes back first
            self._entries.insert(0, evicted)
            self._ids.add(evicted.run_id)

    def copy(self) -> TierWindow:
        """An independent copy (the entries themselves are immutable)."""
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
        """Whether the window holds `capacity` runs: only a full window's grade is tracked."""
        return len(self._entries) >= self.capacity

    def __len__(self) -> int:
        return len(self._entries)

    def to_state(self) -> list[list[Any]]:
        """A JSON-friendly snapshot (one list per run, oldest first); see `from_state`."""
        return [list(e[:STORED_FIELDS]) for e in self._entries]

    @classmethod
    def from_state(cls, capacity: int, state: Iterable[Sequence[Any]]) -> TierWindow:
        """Rebuild a window; a smaller capacity than the snapshot's keeps the newest runs."""
        return cls(capacity, (WindowEntry(*row) for row in state))
