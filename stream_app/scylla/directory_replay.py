"""`stream-app replay DIR...`: a finished experiment's tier table in one command, with no Kafka.

The runs are mapped exactly as `stream-app watch` publishes them and folded in window order
(completed_at, run_id), so the report equals what a worker holds after `watch` published the
same directories. Event line numbers count runs in that order."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from schemas.replay_report import ReplayReport, SkippedRun
from stream_app.core.config import CoreConfig
from stream_app.core.replay import Replay
from stream_app.scylla.scanner import Scanner


def replay_directories(
    roots: Sequence[Path], config: CoreConfig, retire: bool = False
) -> ReplayReport:
    """Replay every finished run of the experiment directories (or results folders)."""
    scanner = Scanner([r.resolve() for r in roots], set(), settle_s=0.0, grace_s=0.0)
    scanner.scan()
    events, skipped = scanner.take()
    replay = Replay(config, retire)
    for line, event in enumerate(events, start=1):
        replay.feed(event.payload, line)
    report = replay.report()
    return report.model_copy(
        update={
            "skipped_runs": [
                SkippedRun(path=str(s.path), reason=s.reason, detail=s.detail) for s in skipped
            ]
        }
    )
