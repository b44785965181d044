"""The watcher's scanner of run files (Harbor trials here; inspect_ai logs in the integration
test): each run handed out until published, then never again; a file read again only when it
changed; what makes no event said once (stream_app/sources/run_files.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stream_app.sources import harbor_jobs
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


def test_a_file_event_parses_only_the_results_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Harbor writes many files per trial: each event must not parse every result.json again
    (10,000 trials made it 0.7 s an event). A job's own result.json makes nothing, said nothing."""
    jobs = tmp_path / "jobs"
    write_job(jobs, [trial(f"a__{n}") for n in range(50)])
    files = RunFiles([jobs], MAPPING)
    parsed: list[Path] = []
    read = harbor_jobs._read

    def counted(path: Path) -> object:
        parsed.append(path)
        return read(path)

    monkeypatch.setattr(harbor_jobs, "_read", counted)
    files.scan()
    ready, said = files.take()
    assert (len(ready), said, len(parsed)) == (50, [], 51)  # 50 trials and the job's own
    parsed.clear()
    changed = jobs / "2026-11-29__10-00-00" / "a__7" / "result.json"
    changed.write_text(json.dumps(trial("a__7", reward=0.0)))
    files.recheck([changed])
    assert parsed == [changed]
    [again] = files.take()[0]  # not yet published: handed out again, as it now reads
    assert again.run_id in {e.run_id for e in ready}
    assert json.loads(again.payload)["passed"] is False
