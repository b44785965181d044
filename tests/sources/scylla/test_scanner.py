"""Which runs are ready, waiting or malformed; each malformed run reported once; published runs
never read again; the state file survives crashes."""

import json
import os
import time
from pathlib import Path

import pytest

from stream_app.sources.scylla.scanner import Scanner, Status
from stream_app.sources.scylla.watch_state import WatchState, default_state_path
from stream_app.sources.skipped import skipped_lines
from tests.scylla_dirs import Run, make_experiment, run_dir, write_json, write_run


class Clock:
    def __init__(self) -> None:
        self.now = time.time() + 3600  # every file written so far has settled

    def __call__(self) -> float:
        return self.now


def scanner(roots: list[Path], published: set[str] | None = None, clock: Clock | None = None):  # type: ignore[no-untyped-def]
    return Scanner(roots, published if published is not None else set(), clock=clock or Clock())


def ids(events) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.run_id for e in events]


def test_complete_in_progress_and_malformed_runs_of_several_experiments(tmp_path: Path) -> None:
    first = make_experiment(tmp_path, "exp-a")
    second = make_experiment(tmp_path, "exp-b", models=["claude-sonnet-4-5-20250929"])
    write_run(first, Run(tier="T0", number=2, ended=_at(30)))
    write_run(first, Run(tier="T0", number=1, ended=_at(10)))
    write_run(first, Run(tier="T1", number=1), finished=False)  # in progress: not found yet
    write_run(second, Run(tier="T0", number=1, ended=_at(20)))
    bad = write_run(second, Run(tier="T1", number=1), result={"run_number": 1, "judge_score": 3})
    scan = scanner([tmp_path])
    scan.scan()
    ready, skipped = scan.take()
    # Window order: (completed_at, run_id), across experiments.
    assert ids(ready) == ["exp-a/T0/00/run_01", "exp-b/T0/00/run_01", "exp-a/T0/00/run_02"]
    assert json.loads(ready[1].payload)["model"] == "claude-sonnet-4-5-20250929"
    assert [(s.path, s.reason) for s in skipped] == [(bad, "missing_field")]
    assert "judge_passed" in skipped[0].detail
    assert skipped_lines(skipped) == [f"skipped {bad}: missing_field: {skipped[0].detail}"]
    counts = scan.counts()
    assert (counts.found, counts.published, counts.skipped, counts.waiting) == (4, 0, 1, 0)
    # Not yet published: handed out again; the malformed run is not reported again.
    scan.scan()
    again, skipped_again = scan.take()
    assert ids(again) == ids(ready)
    assert skipped_again == []
    scan.published_now(again)
    scan.scan()
    assert scan.take() == ([], [])
    counts = scan.counts()
    assert (counts.found, counts.published, counts.skipped) == (4, 3, 1)


def _at(seconds: int):  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime, timedelta

    return datetime(2026, 1, 23, 17, 0, tzinfo=UTC) + timedelta(seconds=seconds)


def test_published_runs_are_not_read_again(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    directory = write_run(experiment, Run())
    (directory / "run_result.json").write_text("{ no longer json")  # never looked at
    scan = scanner([experiment], {"exp-a/T0/00/run_01"})
    scan.scan()
    assert scan.take() == ([], [])
    counts = scan.counts()
    assert (counts.found, counts.published, counts.published_before) == (1, 1, 1)


def test_a_run_result_being_written_waits_then_is_malformed_after_the_grace(
    tmp_path: Path,
) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    directory = write_run(experiment, Run())
    result = directory / "run_result.json"
    result.write_text('{"run_number": 1, "exit_co')  # json.dump half-way
    clock = Clock()
    clock.now = result.stat().st_mtime + 0.1
    scan = scanner([experiment], clock=clock)
    scan.scan()
    assert scan.take() == ([], [])  # settling
    assert scan.next_retry() == pytest.approx(result.stat().st_mtime + 0.5)
    clock.now += 1
    scan.retry_due()
    assert scan.take() == ([], [])  # still not JSON, but within the grace: being written
    assert scan.counts().waiting == 1
    assert scan.next_retry() == pytest.approx(result.stat().st_mtime + 30)
    clock.now += 60
    scan.retry_due()
    ready, skipped = scan.take()
    assert ready == []
    assert [s.reason for s in skipped] == ["invalid_json"]
    assert scan.counts().skipped == 1
    assert scan.next_retry() is None
    # Fixed later: the change brings it back, and it is published.
    write_json(result, Run().result())
    clock.now = result.stat().st_mtime + 1
    scan.scan()
    ready, skipped = scan.take()
    assert ids(ready) == ["exp-a/T0/00/run_01"]
    assert skipped == []
    assert scan.status[next(iter(scan.status))] is Status.READY


def test_a_malformed_run_is_reported_once_until_it_changes(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    run = Run()
    directory = write_run(experiment, run, result={**run.result(), "judge_score": 7})
    scan = scanner([experiment])
    reports = []
    for _ in range(3):
        scan.scan()
        reports += scan.take()[1]
    assert [r.reason for r in reports] == ["out_of_range"]
    # A change to a file it is made from (the judges' timing) makes it looked at again.
    timing = directory / "judge" / "timing.json"
    os.utime(timing, ns=(timing.stat().st_atime_ns, timing.stat().st_mtime_ns + 10**9))
    scan.recheck([timing])
    assert [r.reason for r in scan.take()[1]] == ["out_of_range"]


def test_the_same_experiment_id_in_two_directories(tmp_path: Path) -> None:
    """A fresh start of the same experiment config makes the same run_ids: the first directory
    in name order keeps the id (as replay does), the other is skipped and said, never silently
    dropped."""
    older = make_experiment(tmp_path, "exp-a", name="2026-01-01T00-00-00-exp-a")
    newer = make_experiment(tmp_path, "exp-a", name="2026-02-01T00-00-00-exp-a")
    write_run(older, Run(number=1))
    write_run(newer, Run(number=1))
    write_run(newer, Run(number=2))
    scan = scanner([tmp_path])
    scan.scan()
    ready, skipped = scan.take()
    assert ids(ready) == ["exp-a/T0/00/run_01"]
    assert [(s.path, s.reason) for s in skipped] == [(newer, "duplicate_experiment")]
    assert str(older) in skipped[0].detail
    scan.published_now(ready)
    scan.scan()
    assert scan.take() == ([], [])
    assert scan.counts().skipped_experiments == 1


def test_the_same_run_in_both_layouts(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    write_run(experiment, Run(root=""))
    write_run(experiment, Run(root="completed"))
    scan = scanner([experiment])
    scan.scan()
    ready, skipped = scan.take()
    assert ids(ready) == ["exp-a/T0/00/run_01"]
    assert [(s.path, s.reason) for s in skipped] == [
        (run_dir(experiment, Run(root="completed")), "duplicate_run_id")
    ]


def test_a_changed_experiment_id_is_said(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    write_run(experiment, Run())
    scan = scanner([experiment])
    scan.scan()
    scan.published_now(scan.take()[0])
    config = experiment / "config" / "experiment.json"
    write_json(config, {"experiment_id": "exp-b", "models": ["claude-haiku-4-5"]})
    scan.recheck([config])
    ready, skipped = scan.take()
    assert ids(ready) == ["exp-b/T0/00/run_01"]
    assert [s.reason for s in skipped] == ["experiment_id_changed"]
    assert "was 'exp-a', now 'exp-b'" in skipped[0].detail


def test_a_run_changed_after_it_was_published_is_said_once(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    run = Run()
    directory = write_run(experiment, run)
    scan = scanner([experiment])
    scan.scan()
    scan.published_now(scan.take()[0])
    write_json(directory / "run_result.json", {**run.result(), "judge_score": 0.1})
    for _ in range(2):
        scan.recheck([directory / "run_result.json"])
        scan.scan()
    ready, skipped = scan.take()
    assert ready == []
    assert [s.reason for s in skipped] == ["changed_after_publish"]


def test_a_file_dated_in_the_future_is_not_waited_for(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    directory = write_run(experiment, Run())
    tomorrow = time.time() + 86400
    os.utime(directory / "run_result.json", (tomorrow, tomorrow))
    scan = Scanner([experiment], set())  # the real clock: the file is a day ahead of it
    scan.scan()
    assert ids(scan.take()[0]) == ["exp-a/T0/00/run_01"]


def test_a_tier_directory_moved_in_is_found_from_its_event(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    scan = scanner([experiment])
    scan.scan()
    elsewhere = make_experiment(tmp_path / "elsewhere", "exp-a")
    write_run(elsewhere, Run(tier="T4"))
    (experiment / "completed").mkdir()
    (elsewhere / "completed" / "T4").rename(experiment / "completed" / "T4")
    scan.recheck([experiment / "completed" / "T4"])  # the one event a rename gives
    assert ids(scan.take()[0]) == ["exp-a/T4/00/run_01"]


def test_a_broken_config_is_reported_once_and_its_runs_wait(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    write_run(experiment, Run())
    config = experiment / "config" / "experiment.json"
    config.write_text("{")
    scan = scanner([tmp_path])
    scan.scan()
    scan.scan()
    ready, skipped = scan.take()
    assert ready == []
    assert [(s.path, s.reason) for s in skipped] == [(experiment, "invalid_json")]
    write_json(config, {"experiment_id": "exp-a", "models": ["claude-haiku-4-5"]})
    scan.recheck([config])
    assert ids(scan.take()[0]) == ["exp-a/T0/00/run_01"]


def test_recheck_finds_a_new_experiment_in_a_results_folder(tmp_path: Path) -> None:
    scan = scanner([tmp_path])
    scan.scan()
    experiment = make_experiment(tmp_path, "exp-new")
    directory = write_run(experiment, Run())
    scan.recheck([directory / "run_result.json"])
    assert ids(scan.take()[0]) == ["exp-new/T0/00/run_01"]


def test_give_up_waiting(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "exp-a")
    directory = write_run(experiment, Run())
    clock = Clock()
    clock.now = (directory / "run_result.json").stat().st_mtime + 0.1  # settling
    scan = scanner([experiment], clock=clock)
    scan.scan()
    assert scan.counts().waiting == 1
    assert [location.path for location in scan.give_up_waiting()] == [directory]
    assert scan.counts().found == 0
    assert scan.next_retry() is None


def test_state_survives_a_torn_line_and_is_compacted(tmp_path: Path) -> None:
    path = tmp_path / "state" / "watch.jsonl"
    state = WatchState(path)
    state.add(["a/T0/00/run_01", "a/T0/00/run_02"])
    state.add(["a/T0/00/run_01"])  # already there: not written twice
    state.close()
    assert path.read_text().splitlines() == ['"a/T0/00/run_01"', '"a/T0/00/run_02"']
    with path.open("a") as file:
        file.write('"a/T0/00/run_0')  # a crash mid-append
    reopened = WatchState(path)
    assert reopened.run_ids == {"a/T0/00/run_01", "a/T0/00/run_02"}
    reopened.add(["b/T1/00/run_01"])
    reopened.close()
    assert WatchState(path).run_ids == {"a/T0/00/run_01", "a/T0/00/run_02", "b/T1/00/run_01"}
    assert path.read_bytes().endswith(b'"b/T1/00/run_01"\n')


def test_default_state_path_is_per_destination(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    one = default_state_path("kafka://127.0.0.1:9092", "run-completed")
    assert one.parent == tmp_path / "evalstream"
    assert one != default_state_path("kafka://127.0.0.1:9093", "run-completed")
    assert one != default_state_path("kafka://127.0.0.1:9092", "other-topic")
    assert one == default_state_path("kafka://127.0.0.1:9092", "run-completed")


def test_an_unfinished_run_is_polled_without_any_file_event(tmp_path: Path) -> None:
    """A run directory seen before its run_result.json exists is looked at every 0.5 s: the
    file's own event can be lost when its directory was created just before it."""
    experiment = make_experiment(tmp_path, "exp-a")
    run = Run()
    directory = write_run(experiment, run, finished=False)
    clock = Clock()
    scan = scanner([experiment], clock=clock)
    scan.scan()
    assert scan.next_retry() == pytest.approx(clock.now + 0.5)
    write_json(directory / "run_result.json", run.result())
    scan.retry_due()  # not yet due
    assert scan.take() == ([], [])
    clock.now += 0.5
    scan.retry_due()
    assert ids(scan.take()[0]) == ["exp-a/T0/00/run_01"]
    assert scan.next_retry() is None  # nothing unfinished is left
