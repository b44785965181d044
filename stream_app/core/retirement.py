"""Which experiments retire: those with no accepted run for `experiment_idle_ttl`.

A deployment sees new experiments every day for months; an experiment nobody runs any more must
not keep its windows, tables and gauge series for ever. The rule is one, with two clocks: the
worker measures idleness in processing time (when it accepted the run), `replay` in event time
(the latest `completed_at` it has read). A retired experiment that receives a run starts fresh.
Pure: the caller retires what `idle` returns.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Final

US_PER_S: Final = 1_000_000


class IdleClock:
    """When each experiment last accepted a run; `idle(now)` gives the ones idle for longer than
    the TTL (0: never). A heap of (time, experiment), whose outdated entries are skipped."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_us = round(ttl_s * US_PER_S)
        self.last: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []

    def touch(self, experiment: str, at_us: int) -> None:
        """The experiment accepted a run at `at_us` (later times win; earlier ones are kept out)."""
        if at_us <= self.last.get(experiment, at_us - 1):
            return
        self.last[experiment] = at_us
        if self.ttl_us:
            heapq.heappush(self._heap, (at_us, experiment))
            if len(self._heap) > 2 * len(self.last) + 1024:  # outdated entries: rebuild
                self._heap = [(at, e) for e, at in self.last.items()]
                heapq.heapify(self._heap)

    def due(self, now_us: int) -> bool:
        """Whether `idle(now_us)` would return an experiment (cheap: for a check per run)."""
        heap, cutoff = self._heap, now_us - self.ttl_us
        while heap and heap[0][0] < cutoff:
            at, experiment = heap[0]
            if self.last.get(experiment) == at:
                return True
            heapq.heappop(heap)
        return False

    def idle(self, now_us: int, judged: Callable[[str], bool] = lambda _: True) -> list[str]:
        """The experiments with no run since `now_us - ttl`, oldest first, of those `judged`
        says can be told idle (the others stay, unjudged); they are forgotten here (the
        caller retires them, and a new run starts them again)."""
        out: list[str] = []
        kept: list[tuple[int, str]] = []
        heap, cutoff = self._heap, now_us - self.ttl_us
        if not self.ttl_us:
            return out
        while heap and heap[0][0] < cutoff:
            at, experiment = heapq.heappop(heap)
            if self.last.get(experiment) != at:
                continue
            if judged(experiment):
                del self.last[experiment]
                out.append(experiment)
            else:
                kept.append((at, experiment))
        for entry in kept:
            heapq.heappush(heap, entry)
        return out

    def forget(self, experiment: str) -> None:
        """Stop tracking an experiment (its partition went to another worker)."""
        self.last.pop(experiment, None)

    def clear(self) -> None:
        """Track nothing."""
        self.last.clear()
        self._heap.clear()
