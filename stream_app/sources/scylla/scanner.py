"""Which runs of the watched directories are ready to publish, waiting, or malformed.

ProjectScylla writes `run_result.json` non-atomically, so a run is ready only once it parses and
has not changed for `settle_s` (the rules: docs/operations.md, 'From ProjectScylla'). Filesystem
only: `stream-app watch` publishes what it finds, `replay` folds it, and every `RunEvent` handed
out stays pending until `published()` is told about it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Final

from stream_app.sources.scylla.layout import (
    CONFIG_FILE,
    RUN_RESULT,
    RunLocation,
    experiment_dirs,
    find_runs,
    locate,
)
from stream_app.sources.scylla.run_event import (
    Experiment,
    MalformedRun,
    RunEvent,
    read_experiment,
    run_event,
)
from stream_app.sources.skipped import Skipped

_STILL_WRITING: Final = frozenset({"invalid_json", "missing_file"})


class Status(Enum):
    """Where one run stands."""

    WAITING = "waiting"  # its run_result.json is still being written
    READY = "ready"  # handed out, not yet published
    PUBLISHED = "published"
    SKIPPED = "skipped"


@dataclass
class Counts:
    """Runs found in the watched directories (with a `run_result.json`), by status."""

    found: int = 0
    published: int = 0
    skipped: int = 0
    waiting: int = 0  # being written; a found run neither published, skipped nor waiting is ready
    published_before: int = 0  # published by an earlier watcher (the state file)
    skipped_experiments: int = 0  # experiment directories whose config makes no events


@dataclass
class _ExperimentEntry:
    fingerprint: tuple[int, int]
    experiment: Experiment | None
    problem: MalformedRun | None = None


@dataclass
class Scanner:
    """Finds ready, waiting and malformed runs; `take()` hands out what is ready and new."""

    roots: list[Path]
    published: set[str]  # run_ids published, by this watcher or (the state file) an earlier one
    settle_s: float = 0.5
    grace_s: float = 30.0
    unfinished_poll_s: float = 0.5
    clock: Callable[[], float] = time.time
    status: dict[RunLocation, Status] = field(default_factory=dict)
    _before: set[str] = field(default_factory=set)
    _experiments: dict[Path, _ExperimentEntry] = field(default_factory=dict)
    _owners: dict[str, RunLocation] = field(default_factory=dict)
    _ids: dict[RunLocation, str] = field(default_factory=dict)
    _reported: dict[Path, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    _waiting: dict[RunLocation, float] = field(default_factory=dict)
    _unfinished: dict[RunLocation, None] = field(default_factory=dict)
    _unfinished_due: float = 0.0
    _ready: dict[RunLocation, RunEvent] = field(default_factory=dict)
    _reports: list[Skipped] = field(default_factory=list)
    _sent: dict[RunLocation, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.remember_published_before()

    def remember_published_before(self) -> None:
        """The run_ids published now count as published before this start."""
        self._before = set(self.published)

    # -- what the caller sees -------------------------------------------------------------------

    def take(self) -> tuple[list[RunEvent], list[Skipped]]:
        """Runs ready since the last call, in window order, and newly malformed directories.
        A taken run is handed out again by later scans until `published()` records it."""
        ready = sorted(self._ready.values(), key=lambda e: e.order)
        reports, self._ready, self._reports = self._reports, {}, []
        return ready, reports

    def published_now(self, events: Iterable[RunEvent]) -> None:
        """The broker acknowledged these runs."""
        for event in events:
            self.published.add(event.run_id)
            owner = self._owners.get(event.run_id)
            if owner is not None and self.status.get(owner) is Status.READY:
                self.status[owner] = Status.PUBLISHED
                self._sent[owner] = event.fingerprint

    def counts(self) -> Counts:
        """How many runs are in each state now."""
        counts = Counts()
        for location, status in self.status.items():
            counts.found += 1
            if status is Status.PUBLISHED:
                counts.published += 1
                counts.published_before += self._ids[location] in self._before
            elif status is Status.SKIPPED:
                counts.skipped += 1
            elif status is Status.WAITING:
                counts.waiting += 1
        counts.skipped_experiments = sum(1 for e in self._experiments.values() if e.problem)
        return counts

    def next_retry(self) -> float | None:
        """When a waiting or unfinished run should be looked at again (the clock's time)."""
        times = list(self._waiting.values())
        if self._unfinished:
            times.append(self._unfinished_due)
        return min(times, default=None)

    # -- scanning ---------------------------------------------------------------------------------

    def scan(self) -> None:
        """Look at every run of every watched experiment."""
        for experiment_dir in experiment_dirs(self.roots):
            experiment = self._experiment(experiment_dir)
            if experiment is not None:
                for location in find_runs(experiment_dir):
                    self._check(location, experiment)

    def recheck(self, paths: Iterable[Path]) -> None:
        """Look at the runs the changed paths belong to. A changed config, or a path outside
        every known experiment (a new experiment in a results folder), makes a full scan; a
        directory inside an experiment makes a scan of that experiment."""
        known = list(self._experiments)
        scanned: set[Path] = set()
        for path in paths:
            location = locate(path, known)
            owner = next((e for e in known if path.is_relative_to(e)), None)
            if location is not None:
                experiment = self._experiment(location.experiment_dir)
                if experiment is not None:
                    self._check(location, experiment)
            elif path.name == CONFIG_FILE.name or owner is None:
                self.scan()
                return
            elif owner not in scanned and path.is_dir():  # a new tier or subtest directory
                scanned.add(owner)
                experiment = self._experiment(owner)
                if experiment is not None:
                    for run in find_runs(owner):
                        self._check(run, experiment)

    def retry_due(self) -> None:
        """Look again at the waiting runs whose time has come, and every `unfinished_poll_s` at
        the runs that have a directory but no `run_result.json` yet."""
        now = self.clock()
        due = [loc for loc, at in self._waiting.items() if at <= now]
        if self._unfinished and self._unfinished_due <= now:
            due += list(self._unfinished)
            self._unfinished_due = now + self.unfinished_poll_s
        for location in due:
            experiment = self._experiment(location.experiment_dir)
            if experiment is not None:
                self._check(location, experiment)

    def give_up_waiting(self) -> list[RunLocation]:
        """For a single pass (`--once`, replay): the runs still being written, forgotten."""
        left = sorted(self._waiting)
        for location in left:
            del self._waiting[location]
            self.status.pop(location, None)
        return left

    # -- one experiment, one run ------------------------------------------------------------------

    def _experiment(self, experiment_dir: Path) -> Experiment | None:
        config = experiment_dir / CONFIG_FILE
        fingerprint = _stat(config)
        entry = self._experiments.get(experiment_dir)
        if entry is None or entry.fingerprint != fingerprint:
            try:
                experiment = read_experiment(experiment_dir)
            except MalformedRun as problem:
                self._experiments[experiment_dir] = _ExperimentEntry(fingerprint, None, problem)
                self._reports.append(Skipped(experiment_dir, problem.reason, problem.detail))
                return None
            was = entry.experiment if entry is not None else None
            if was is not None and was.experiment_id != experiment.experiment_id:
                self._reports.append(
                    Skipped(
                        experiment_dir,
                        "experiment_id_changed",
                        f"was {was.experiment_id!r}, now {experiment.experiment_id!r}: its runs "
                        f"are published again under the new id; the old id's stay until retired",
                    )
                )
            entry = _ExperimentEntry(fingerprint, experiment)
            self._experiments[experiment_dir] = entry
        if entry.experiment is None:
            return None
        first = min(
            (
                d
                for d, e in self._experiments.items()
                if e.experiment is not None
                and e.experiment.experiment_id == entry.experiment.experiment_id
            ),
            default=experiment_dir,
        )
        if first != experiment_dir and entry.problem is None:
            # The same experiment id in two directories (a fresh start of the same config) makes
            # the same run_ids: the first directory in name order keeps the id, as in replay.
            entry.problem = MalformedRun(
                "duplicate_experiment", f"{entry.experiment.experiment_id!r} is also {first}"
            )
            self._reports.append(
                Skipped(experiment_dir, entry.problem.reason, entry.problem.detail)
            )
        return None if entry.problem is not None else entry.experiment

    def _check(self, location: RunLocation, experiment: Experiment) -> None:
        run_id = location.run_id(experiment.experiment_id)
        self._waiting.pop(location, None)
        owner = self._owners.get(run_id, location)
        if owner == location and run_id in self.published:
            self._claim(run_id, location, Status.PUBLISHED)
            sent = self._sent.get(location)
            on_disk = _fingerprint(location.path) if sent is not None else None
            if on_disk is not None and on_disk != sent:
                self._sent[location] = on_disk
                self._reports.append(
                    Skipped(
                        location.path,
                        "changed_after_publish",
                        "its files changed after it was published; the published run stands "
                        "(run_id is the idempotency key)",
                    )
                )
            return
        fingerprint = _fingerprint(location.path)
        if fingerprint[0] == _ABSENT:
            # Not finished yet. Polled: a file event inside a directory that was just created
            # can be missed (the kernel watch is added after the directory appears).
            self.status.pop(location, None)
            if location.path.is_dir():
                if not self._unfinished:
                    self._unfinished_due = self.clock() + self.unfinished_poll_s
                self._unfinished[location] = None
            else:
                self._unfinished.pop(location, None)
            return
        self._unfinished.pop(location, None)
        if owner != location:
            problem = MalformedRun("duplicate_run_id", f"{run_id} is also {owner.path}")
            self._skip(location, fingerprint, problem)
            return
        if self._reported.get(location.path) == fingerprint:
            return  # reported as it is; a change to one of its files brings it back
        now = self.clock()
        modified = fingerprint[0][0] / 1e9
        age = now - modified  # negative for a file dated in the future: settled, not waiting
        if 0 <= age < self.settle_s:
            self._wait(location, modified + self.settle_s)
            return
        try:
            event = run_event(location, experiment, fingerprint)
        except MalformedRun as problem:
            if problem.reason in _STILL_WRITING and 0 <= age < self.grace_s:
                self._wait(location, modified + self.grace_s)
            else:
                self._skip(location, fingerprint, problem)
            return
        self._reported.pop(location.path, None)
        self._claim(run_id, location, Status.READY)
        self._ready[location] = event

    def _claim(self, run_id: str, location: RunLocation, status: Status) -> None:
        self._owners[run_id] = location
        self._ids[location] = run_id
        self.status[location] = status

    def _wait(self, location: RunLocation, until: float) -> None:
        self._waiting[location] = until
        self.status[location] = Status.WAITING

    def _skip(
        self, location: RunLocation, fingerprint: tuple[tuple[int, int], ...], problem: MalformedRun
    ) -> None:
        if self._reported.get(location.path) == fingerprint:
            return
        self._reported[location.path] = fingerprint
        self.status[location] = Status.SKIPPED
        self._ready.pop(location, None)
        self._reports.append(Skipped(location.path, problem.reason, problem.detail))


_ABSENT: Final = (0, -1)
_RUN_FILES: Final = (
    RUN_RESULT,
    os.path.join("judge", "timing.json"),
    os.path.join("agent", "timing.json"),
)


def _stat(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return _ABSENT
    return st.st_mtime_ns, st.st_size


def _fingerprint(run_dir: Path) -> tuple[tuple[int, int], ...]:
    """(mtime, size) of the files a run's event is made from; run_result.json first."""
    return tuple(_stat(run_dir / name) for name in _RUN_FILES)
