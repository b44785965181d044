"""The watcher's scanner for harnesses that write their runs into files as they go: inspect_ai
logs (a `.eval` or `.json` file per eval, its samples added as they end) and Harbor trials (a
`result.json` each, written when the trial ends). A scan reads only the files whose size or
modification time changed since the last, and hands out the runs not published yet; what a file
makes no event of is said once. The same interface as the ProjectScylla `Scanner`, so `watch` and
`demo --watch` publish either the same way (docs/operations.md, 'From inspect_ai')."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from stream_app.sources.harbor_jobs import result_files, trial_events, trial_results
from stream_app.sources.inspect_logs import log_events, log_files
from stream_app.sources.run_mapping import RunMapping
from stream_app.sources.scylla.run_event import RunEvent
from stream_app.sources.scylla.scanner import Counts
from stream_app.sources.skipped import Skipped

Find = Callable[[Path], list[Path]]
"""The run files of one kind under a root."""
Read = Callable[[Path], tuple[list[dict[str, Any]], list[Skipped]]]
"""One file's events (as JSON values) and what in it made none."""


def holds_run_files(roots: Iterable[Path]) -> bool:
    """Whether any root holds an inspect_ai log or a Harbor trial."""
    return any(log_files(root) or trial_results(root) for root in roots)


def file_readers(mapping: RunMapping) -> list[tuple[Find, Read]]:
    """Each kind of run file: how its files under a root are found, and how one is read."""
    return [
        (log_files, lambda path: log_events(path, mapping)),
        (result_files, lambda path: trial_events(path, mapping)),
    ]


class RunFiles:
    """Runs read from inspect_ai logs and Harbor trials under `roots`."""

    def __init__(self, roots: list[Path], mapping: RunMapping) -> None:
        self.roots = roots
        self._readers = file_readers(mapping)
        self.published: set[str] = set()
        self._before: set[str] = set()
        self._seen: dict[Path, tuple[int, int]] = {}
        self._found: set[str] = set()
        self._ready: dict[str, RunEvent] = {}
        self._said: set[tuple[Path, str, str]] = set()
        self._reports: list[Skipped] = []

    def remember_published_before(self) -> None:
        """The run_ids published now count as published before this start."""
        self._before = set(self.published)

    def scan(self) -> None:
        """Read every file that changed since the last scan."""
        for files, read in self._readers:
            for path in (p for root in self.roots for p in files(root)):
                try:
                    stat = path.stat()
                except OSError:
                    continue
                fingerprint = (stat.st_mtime_ns, stat.st_size)
                if self._seen.get(path) == fingerprint:
                    continue
                self._seen[path] = fingerprint
                events, skipped = read(path)
                for event in events:
                    self._hand_out(event)
                for problem in skipped:
                    if (key := (problem.path, problem.reason, problem.detail)) not in self._said:
                        self._said.add(key)
                        self._reports.append(problem)

    def _hand_out(self, event: dict[str, Any]) -> None:
        run_id = event["run_id"]
        self._found.add(run_id)
        if run_id not in self.published:
            self._ready[run_id] = RunEvent.of(event)

    def recheck(self, paths: Iterable[Path]) -> None:
        """Files changed (file events): scan, which reads only those."""
        self.scan()

    def retry_due(self) -> None:
        """Nothing waits here: a log's unfinished samples come with a later scan."""

    def next_retry(self) -> float | None:
        """No retries are due."""
        return None

    def give_up_waiting(self) -> list[Any]:
        """Nothing is left waiting."""
        return []

    def take(self) -> tuple[list[RunEvent], list[Skipped]]:
        """Runs ready since the last call, in window order, and what newly made no event."""
        ready = sorted(self._ready.values(), key=lambda e: e.order)
        reports, self._ready, self._reports = self._reports, {}, []
        return ready, reports

    def published_now(self, events: Iterable[RunEvent]) -> None:
        """The broker acknowledged these runs."""
        self.published.update(event.run_id for event in events)

    def counts(self) -> Counts:
        """How many runs are in each state now."""
        published = self._found & self.published
        skipped = len({(path, detail) for path, _, detail in self._said})
        return Counts(
            found=len(self._found) + skipped,
            published=len(published),
            skipped=skipped,
            published_before=len(published & self._before),
        )


class Scanners:
    """The ProjectScylla scanner and `RunFiles` behind the one interface the watcher reads, one
    set of published run_ids shared by both: a watched directory may hold either, or come to."""

    def __init__(self, scylla: Any, files: RunFiles) -> None:
        self.parts = (scylla, files)
        self.roots: list[Path] = list(scylla.roots)
        self.published: set[str] = scylla.published
        files.published = self.published

    def remember_published_before(self) -> None:
        """The run_ids published now count as published before this start."""
        for part in self.parts:
            part.remember_published_before()

    def scan(self) -> None:
        """Look at everything."""
        for part in self.parts:
            part.scan()

    def recheck(self, paths: Iterable[Path]) -> None:
        """Look at what changed."""
        changed = list(paths)
        for part in self.parts:
            part.recheck(changed)

    def retry_due(self) -> None:
        """Look again at what waited."""
        for part in self.parts:
            part.retry_due()

    def next_retry(self) -> float | None:
        """When the next look at something waiting is due."""
        due = [t for t in (part.next_retry() for part in self.parts) if t is not None]
        return min(due, default=None)

    def give_up_waiting(self) -> list[Any]:
        """What is still being written, given up on (`--once`)."""
        return [location for part in self.parts for location in part.give_up_waiting()]

    def take(self) -> tuple[list[RunEvent], list[Skipped]]:
        """Runs ready since the last call, in window order, and what newly made no event."""
        ready: list[RunEvent] = []
        reports: list[Skipped] = []
        for part in self.parts:
            more, said = part.take()
            ready += more
            reports += said
        return sorted(ready, key=lambda e: e.order), reports

    def published_now(self, events: Iterable[RunEvent]) -> None:
        """The broker acknowledged these runs."""
        acknowledged = list(events)
        for part in self.parts:
            part.published_now(acknowledged)

    def counts(self) -> Counts:
        """How many runs are in each state now, both kinds together."""
        total = Counts()
        for part in self.parts:
            counts = part.counts()
            for name in vars(total):
                setattr(total, name, getattr(total, name) + getattr(counts, name))
        return total
