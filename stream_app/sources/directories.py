"""`stream-app replay DIR...` and `backtest DIR...`: directories of runs in one command, with no
Kafka. Each directory is told apart by its content: ProjectScylla experiments (`scylla`),
inspect_ai logs (`inspect_logs`), or Harbor jobs (`harbor_jobs`). The runs are mapped exactly as
`watch` (or the hook) publishes them and folded in window order (completed_at, run_id), so the
report equals what a worker holds after the same runs were published. Event line numbers count
runs in that order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from schemas.replay_report import SkippedRun
from stream_app.core.config import CoreConfig
from stream_app.core.replay import Replay
from stream_app.errors import UserError
from stream_app.sources.run_files import file_readers, holds_run_files
from stream_app.sources.run_mapping import RunMapping
from stream_app.sources.scylla.layout import WHAT_AN_EXPERIMENT_IS, experiment_dirs
from stream_app.sources.scylla.run_event import RunEvent
from stream_app.sources.scylla.scanner import Scanner
from stream_app.sources.skipped import Skipped


def printable(text: object) -> str:
    """A path as text JSON can carry: bytes that are not UTF-8 (kept by Python as lone
    surrogates) become U+FFFD."""
    return str(text).encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def scylla_events(roots: Sequence[Path]) -> tuple[list[RunEvent], list[Skipped]]:
    """Every finished run of the experiment directories (or results folders), and the runs
    that made no event."""
    scanner = Scanner([r.resolve() for r in roots], set(), settle_s=0.0, grace_s=0.0)
    scanner.scan()
    events, skipped = scanner.take()
    skipped += [  # none with no grace; said rather than dropped if ever
        Skipped(location.path, "still_being_written", "run_result.json is being written")
        for location in scanner.give_up_waiting()
    ]
    return events, skipped


def directory_events(
    roots: Sequence[Path], mapping: RunMapping | None = None
) -> tuple[list[bytes], list[Skipped]]:
    """The runs of every directory, each kind it holds read, in window order (`mapping`: the
    user's choices for harnesses' runs); raises `UserError` for a directory of no kind."""
    readers = file_readers(mapping or RunMapping())
    scylla = [root for root in roots if experiment_dirs([root])]
    events, skipped = scylla_events(scylla) if scylla else ([], [])
    for root in roots:
        found = root in scylla
        for files, read in readers:
            for path in files(root):
                more, left = read(path)
                events += [RunEvent.of(event) for event in more]
                skipped += left
                found = found or bool(more or left)
        # A root whose files made nothing (a log with no finished sample yet, a job's own
        # result.json alone): whether it holds a log or a trial at all, asked only then.
        if not found and not holds_run_files([root]):
            raise UserError(
                f"no ProjectScylla experiment, inspect_ai log or Harbor trial in {root} "
                f"({WHAT_AN_EXPERIMENT_IS}; an inspect_ai log is a .eval or .json file it wrote; "
                "a Harbor trial, a result.json under jobs/)"
            )
    events.sort(key=lambda event: event.order)
    return [event.payload for event in events], skipped


def replay_directories(
    roots: Sequence[Path],
    config: CoreConfig,
    retire: bool = False,
    watch: Callable[[bytes], None] | None = None,
    mapping: RunMapping | None = None,
) -> tuple[Replay, list[SkippedRun]]:
    """Every finished run of the directories fed in window order, and the runs that made no
    event: the one path of `replay DIR` and `backtest DIR`."""
    events, skipped = directory_events(roots, mapping)
    replay = Replay(config, retire)
    for line, event in enumerate(events, start=1):
        if watch is not None:
            watch(event)
        replay.feed(event, line)
    return replay, [
        SkippedRun(path=printable(s.path), reason=s.reason, detail=printable(s.detail))
        for s in skipped
    ]
