"""The watcher's scanner of run files (Harbor trials here; inspect_ai logs in the integration
test): each run handed out until published, then never again; a file read again only when it
changed; what makes no event said once (stream_app/sources/run_files.py)."""

from __future__ import annotations

import json
from pathlib import Path

from stream_app.sources.run_files import RunFiles
from tests.sources.test_harbor_jobs import MAPPING, trial, write_job


def test_runs_are_handed_out_until_published_and_problems_said_once(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    write_job(jobs, [trial("a__1"), trial("a__2", reward=0.0), trial("a__3", reward=None)])
    files = RunFiles([jobs], MAPPING)
    files.scan()
    ready, said = files.take()
    assert len(ready) == 2
    assert [s.reason for s in said] == ["no_reward"]
    files.published_now(ready[:1])
    files.scan()  # nothing changed: nothing read, nothing said again
    assert files.take() == ([], [])
    (jobs / "2026-11-29__10-00-00" / "a__2" / "result.json").write_text(
        json.dumps(trial("a__2", reward=1.0))
    )
    files.scan()  # a changed file is read again; its run, not yet published, is handed out
    ready_again, said_again = files.take()
    assert [e.run_id for e in ready_again] == [ready[1].run_id]
    assert said_again == []
    files.published_now(ready_again)
    counts = files.counts()
    assert (counts.found, counts.published, counts.skipped) == (3, 2, 1)
