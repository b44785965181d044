"""`replay DIR` gives what `replay FILE` gives for the same runs: the real sample, written back
as ProjectScylla directories, replays to the same report."""

from __future__ import annotations

import json
from pathlib import Path

from schemas.replay_report import ReplayReport
from stream_app.core.config import CoreConfig
from stream_app.core.replay import replay_lines
from stream_app.sources import directories
from stream_app.sources.scylla.scanner import Scanner
from tests.helpers import SAMPLE_FILE
from tests.scylla_dirs import Run, make_experiment, write_event_as_run, write_run

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()


def replay_directories(roots: list[Path], config: CoreConfig) -> ReplayReport:
    """What `stream-app replay DIR...` reports: the runs replayed, the directories skipped."""
    replay, skipped = directories.replay_directories(roots, config)
    return replay.report().model_copy(update={"skipped_runs": skipped})


def test_sample_as_directories_replays_like_the_file(tmp_path: Path) -> None:
    for i, line in enumerate(SAMPLE):
        write_event_as_run(tmp_path, json.loads(line), root="" if i % 3 == 0 else "completed")
    # Every event comes back field by field.
    scanner = Scanner([tmp_path], set(), settle_s=0.0)
    scanner.scan()
    events, skipped = scanner.take()
    assert skipped == []
    want = {json.loads(line)["run_id"]: json.loads(line) for line in SAMPLE}
    got = {e.run_id: json.loads(e.payload) for e in events}
    assert got == want
    config = CoreConfig()
    from_dirs = replay_directories([tmp_path], config)
    from_file = replay_lines(SAMPLE, config)
    assert from_dirs.tiers == from_file.tiers
    assert from_dirs.cross_tier == from_file.cross_tier
    assert from_dirs.rejected == []
    assert from_dirs.skipped_runs == []
    assert len(from_dirs.tiers) == 21


def test_skipped_runs_are_in_the_report(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    write_run(experiment, Run(number=1))
    bad = write_run(experiment, Run(number=2), result={"run_number": 2})
    write_run(experiment, Run(number=3), finished=False)
    report = replay_directories([experiment], CoreConfig())
    assert [a.run_ids for a in report.tiers] == [["exp-a/T0/00/run_01"]]
    assert [(s.path, s.reason) for s in report.skipped_runs] == [(str(bad), "missing_field")]


def test_names_that_are_not_utf8_do_not_break_the_report(tmp_path: Path) -> None:
    import os

    experiment = make_experiment(tmp_path, "exp-a")
    write_run(experiment, Run(subtest=os.fsdecode(b"\xff")))
    report = replay_directories([experiment], CoreConfig())
    assert [s.reason for s in report.skipped_runs] == ["invalid_name"]
    assert "\ufffd" in report.skipped_runs[0].path
    report.model_dump_json()  # serialisable
