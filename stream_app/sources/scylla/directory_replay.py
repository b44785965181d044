"""`stream-app replay DIR...`: a finished experiment's tier table in one command, with no Kafka.

The runs are mapped exactly as `stream-app watch` publishes them and folded in window order
(completed_at, run_id), so the report equals what a worker holds after `watch` published the
same directories. Event line numbers count runs in that order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from schemas.replay_report import SkippedRun
from stream_app.core.config import CoreConfig
from stream_app.core.replay import Replay
from stream_app.sources.scylla.scanner import Scanner, Skipped


def printable(text: object) -> str:
    """A path as text JSON can carry: bytes that are not UTF-8 (kept by Python as lone
    surrogates) become U+FFFD."""
    return str(text).encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def replay_directory_runs(
    roots: Sequence[Path],
    config: CoreConfig,
    retire: bool = False,
    watch: Callable[[bytes], None] | None = None,
) -> tuple[Replay, list[SkippedRun]]:
    """Every finished run of the experiment directories (or results folders) fed in window
    order, and the runs that made no event: the one path of `replay DIR` and `backtest DIR`."""
    scanner = Scanner([r.resolve() for r in roots], set(), settle_s=0.0, grace_s=0.0)
    scanner.scan()
    events, skipped = scanner.take()
    skipped += [  # none with no grace; said rather than dropped if ever
        Skipped(location.path, "still_being_written", "run_result.json is being written")
        for location in scanner.give_up_waiting()
    ]
    replay = Replay(config, retire)
    for line, event in enumerate(events, start=1):
        if watch is not None:
            watch(event.payload)
        replay.feed(event.payload, line)
    return replay, [
        SkippedRun(path=printable(s.path), reason=s.reason, detail=printable(s.detail))
        for s in skipped
    ]
