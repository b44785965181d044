"""inspect_ai logs as runs: the mapping of one sample (tier, experiment, run id, score, error,
usage), and a real inspect_ai eval's logs replayed, run for run what inspect_ai's own reader
finds in them (docs/operations.md, 'From inspect_ai')."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from schemas.run_completed import MAX_ERROR_CHARS
from stream_app.sources import inspect_logs as inspect_logs_module
from stream_app.sources.directories import directory_events
from stream_app.sources.inspect_logs import score_value
from stream_app.sources.inspect_run import (
    MAX_ID_CHARS,
    EvalHeader,
    Refused,
    SampleResult,
    run_event,
)
from stream_app.sources.run_mapping import RunMapping
from tests.helpers import REPO, require_module
from tests.sources.test_harbor_jobs import MAPPING, trial, write_job

# One worker runs the module: its fixtures are made once, not once per pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("inspect-logs")

HEADER = EvalHeader("E1", "add", {}, "anthropic/claude-sonnet-4-5", {"tier": "T1"}, None)
USAGE = {"input_tokens": 100, "output_tokens": 10, "input_tokens_cache_read": 30}


def sample(**change: Any) -> SampleResult:
    fields: dict[str, Any] = {
        "sample_id": "s1",
        "epoch": 2,
        "scores": {"match": 1.0},
        "usage": USAGE,
        "started_at": "2026-11-29T10:00:00+00:00",
        "completed_at": "2026-11-29T10:00:05.5+00:00",
    }
    return SampleResult(**(fields | change))


def test_a_sample_is_one_run_of_its_task_and_tier() -> None:
    event = run_event(HEADER, sample(), RunMapping())
    assert event["run_id"] == "inspect/E1/s1/2"
    assert (event["experiment_id"], event["tier"], event["subtest"]) == ("add", "T1", "s1")
    assert (event["run_number"], event["passed"], event["suite"]) == (2, True, HEADER.model)
    assert event["tokens"] == {"input": 100, "output": 10, "cache_creation": 0, "cache_read": 30}
    assert "cost_usd" not in event  # priced from the table


def test_no_tier_is_refused_never_guessed() -> None:
    untiered = EvalHeader("E2", "add", {}, "m", {}, None)
    with pytest.raises(Refused) as refused:
        run_event(untiered, sample(), RunMapping())
    assert refused.value.reason == "no_tier"
    assert "--metadata tier=" in refused.value.detail
    assert run_event(untiered, sample(), RunMapping(tiers={"m": "T3"}))["tier"] == "T3"
    with pytest.raises(Refused, match="bad_tier"):
        run_event(EvalHeader("E3", "add", {}, "m", {"tier": "gold"}), sample(), RunMapping())


def test_the_chosen_scorer_and_threshold_decide_passed() -> None:
    scored = sample(scores={"match": 0.0, "judge": 0.75})
    assert run_event(HEADER, scored, RunMapping())["passed"] is False  # the first scorer
    judged = run_event(HEADER, scored, RunMapping(scorer="judge", pass_at=0.7))
    assert judged["passed"] is True
    assert judged["judgment"]["summary"]["weighted_score"] == 0.75
    with pytest.raises(Refused, match="no_score"):
        run_event(HEADER, scored, RunMapping(scorer="absent"))


def test_an_errored_sample_is_a_failed_run() -> None:
    errored = run_event(HEADER, sample(scores={}, error="RuntimeError: boom"), RunMapping())
    assert errored["passed"] is False
    assert errored["judgment"]["summary"]["weighted_score"] == 0.0
    assert errored["error"] == "RuntimeError: boom"
    assert "error" not in run_event(HEADER, sample(), RunMapping())
    long = run_event(HEADER, sample(scores={}, error="x" * 10_000), RunMapping())
    assert len(long["error"]) == MAX_ERROR_CHARS


def test_task_arguments_and_long_names_stay_within_the_schema() -> None:
    header = EvalHeader("E4", "add", {"n": 3, "level": "hard"}, "m", {"tier": "T0"})
    assert run_event(header, sample(), RunMapping())["experiment_id"] == 'add(level="hard", n=3)'
    long = run_event(HEADER, sample(sample_id="x" * 500), RunMapping())
    assert len(long["run_id"]) == MAX_ID_CHARS
    other = run_event(HEADER, sample(sample_id="x" * 499 + "y"), RunMapping())
    assert other["run_id"] != long["run_id"]  # a digest keeps them apart


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The logs real inspect_ai evals wrote (tests/inspect_evals.py), no network: both tiers'
    in `logs`, the retried eval's in `retried/logs`, made by one process (importing inspect_ai
    is most of its cost) for the module, whose tests run in one pytest-xdist worker (its
    `xdist_group`) and only read them."""
    require_module("inspect_ai", "inspect")
    root = tmp_path_factory.mktemp("inspect-logs")
    command = [sys.executable, "-m", "tests.inspect_evals", str(root / "logs")]
    retried = ["--retried", str(root / "retried" / "logs")]
    # inspect_ai's control channel off: nothing here uses it; the same logs, 0.5 s sooner
    env = {**os.environ, "INSPECT_EVAL_CTL_SERVER": "false"}
    subprocess.run([*command, *retried], cwd=REPO, env=env, check=True, timeout=180)
    return root


@pytest.fixture
def eval_logs(inspect_logs: Path) -> Path:
    """Both tiers' logs: two tasks, two epochs, T0's as `.eval` files and T1's as `.json`."""
    return inspect_logs / "logs"


def inspect_counts(logs: Path) -> Counter[tuple[str, str, str]]:
    """Runs and passes per (task, tier), as inspect_ai's own reader finds them."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    counts: Counter[tuple[str, str, str]] = Counter()
    for info in list_eval_logs(str(logs)):
        log = read_eval_log(info.name)
        tier = (log.eval.metadata or {})["tier"]
        for s in log.samples or []:
            counts[log.eval.task, tier, "runs"] += 1
            scores = s.scores or {}
            passed = s.error is None and scores and next(iter(scores.values())).value == "C"
            counts[log.eval.task, tier, "passes"] += bool(passed)
    return counts


def test_a_json_log_rewritten_at_its_path_is_read_anew(eval_logs: Path, tmp_path: Path) -> None:
    """inspect_ai writes a JSON log's snapshots, then its end, each over the last: the watcher
    reads the new samples of each, though inspect_ai's own reader of a JSON log's summaries
    keeps the last log it read by path."""
    from inspect_ai.log import read_eval_log, write_eval_log

    finished = read_eval_log(str(next(eval_logs.glob("*.json"))))
    assert finished.samples
    path = tmp_path / "snapshot.json"
    started = finished.model_copy(update={"samples": None, "status": "started"})
    write_eval_log(started, str(path))
    assert inspect_logs_module.log_events(path, RunMapping()) == ([], [])
    write_eval_log(finished, str(path))
    events, skipped = inspect_logs_module.log_events(path, RunMapping())
    assert skipped == []
    assert len(events) == sum(1 for s in finished.samples if s.summary().completed)


def replay(directory: Path) -> subprocess.CompletedProcess[bytes]:
    """`stream-app replay DIRECTORY`, as a user runs it."""
    command = [sys.executable, "-m", "stream_app", "replay", str(directory)]
    return subprocess.run(command, cwd=REPO, capture_output=True, timeout=120, check=False)


def test_replay_of_real_inspect_logs_counts_what_inspect_reads(eval_logs: Path) -> None:
    assert {p.suffix for p in eval_logs.iterdir()} == {".eval", ".json"}  # both formats
    with ThreadPoolExecutor(1) as pool:  # the subprocess and inspect_ai's reader side by side
        replaying = pool.submit(replay, eval_logs)
        theirs = inspect_counts(eval_logs)
        done = replaying.result()
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rejected"] == []
    assert report["skipped_runs"] == []
    ours = Counter[tuple[str, str, str]]()
    for tier in report["tiers"]:
        ours[tier["experiment_id"], tier["tier"], "runs"] = tier["cumulative"]["runs"]
        ours[tier["experiment_id"], tier["tier"], "passes"] = tier["cumulative"]["passes"]
    assert ours == theirs
    assert ours["add_more", "T0", "runs"] == 10  # the errored sample's two epochs count, failed
    by_tier = {(t["experiment_id"], t["tier"]): t["cost_usd"]["max"] for t in report["tiers"]}
    assert by_tier["add", "T1"] == 0.0125  # its own cost
    assert by_tier["add", "T0"] == pytest.approx((120 * 1.0 + 8 * 5.0 + 40 * 0.1) / 1e6)  # table


def test_a_log_that_cannot_be_read_is_said_and_the_others_replay(
    eval_logs: Path, tmp_path: Path
) -> None:
    mixed = tmp_path / "logs"
    mixed.mkdir()
    for log in eval_logs.iterdir():
        (mixed / log.name).write_bytes(log.read_bytes())
    (mixed / "2026-11-29T00-00-00-00-00_broken.eval").write_bytes(b"not a zip")
    (mixed / "notes.json").write_text('{"not": "a log"}')  # not taken for one
    done = replay(mixed)
    report = json.loads(done.stdout)
    assert [s["reason"] for s in report["skipped_runs"]] == ["unreadable_log"]
    assert "broken.eval" in report["skipped_runs"][0]["path"]
    assert b"skipped" in done.stderr
    assert sum(t["cumulative"]["runs"] for t in report["tiers"]) == 36


def test_a_directory_of_neither_kind_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text('{"not": "a log"}')
    done = replay(tmp_path)
    assert done.returncode == 2
    assert b"no ProjectScylla experiment, inspect_ai log or Harbor trial in" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value", [{"a": 1}, [1, 0], "hello", float("nan"), float("inf")])
def test_a_score_that_is_not_a_number_is_refused_not_read_as_0(value: object) -> None:
    with pytest.raises(Refused, match="bad_score"):
        score_value("judge", value)


def test_inspect_ai_letters_and_booleans_read_as_numbers() -> None:
    assert [score_value("s", v) for v in ("C", "I", "P", "N", True, 0.25)] == [
        1.0,
        0.0,
        0.5,
        0.0,
        1.0,
        0.25,
    ]


def test_a_directory_of_logs_and_trials_replays_both(eval_logs: Path, tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for log in eval_logs.iterdir():
        (mixed / log.name).write_bytes(log.read_bytes())
    write_job(mixed / "jobs", [trial(f"hello-world__{n}") for n in range(3)])
    (mixed / "logs.json").write_text('{"x.eval": {"version": 2, "status": "success", "eval": {}}}')
    os.mkfifo(mixed / "fifo.json")  # nothing blocks on it
    events, skipped = directory_events([mixed], MAPPING)
    assert len(events) == 36 + 3
    assert skipped == []  # eval_set's logs.json is not a log


def test_a_retried_eval_counts_each_execution_once(inspect_logs: Path) -> None:
    """`eval_retry` reuses the samples that finished (their uuid, under a new eval_id) and runs
    the errored one again: 4 samples make 5 runs, the errored attempt a failed one."""
    logs = inspect_logs / "retried" / "logs"
    assert len(list(logs.iterdir())) == 2  # the errored attempt's log and the retry's
    events, skipped = directory_events([logs], MAPPING)
    assert skipped == []
    runs = [json.loads(e) for e in events]
    assert len(runs) == 8  # the reused samples are in both logs ...
    executions = {r["run_id"]: r for r in runs}
    assert len(executions) == 5  # ... as one run each (the window drops the repeat)
    assert sum(r["passed"] for r in executions.values()) == 4
    assert [r["subtest"] for r in executions.values() if not r["passed"]] == ["sum-3"]
    done = replay(logs)
    (tier,) = json.loads(done.stdout)["tiers"]
    assert (tier["cumulative"]["runs"], tier["cumulative"]["passes"]) == (5, 4)


def test_a_log_too_large_to_read_is_skipped_unread(
    eval_logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound is on what the reader would take in, as the file declares it: an `.eval`'s
    members but the samples (a zip member never yields more than its declared size), a `.json`
    log's size. Over it the log is skipped as `too_large`, never read."""
    eval_log = next(p for p in sorted(eval_logs.iterdir()) if p.suffix == ".eval")
    with zipfile.ZipFile(eval_log) as archive:
        members = archive.infolist()
    others = sum(m.file_size for m in members if not m.filename.startswith("samples/"))
    assert 0 < inspect_logs_module.read_size(eval_log) == others
    assert others < sum(m.file_size for m in members)  # the samples are not counted
    monkeypatch.setattr(inspect_logs_module, "MAX_LOG_READ_BYTES", others - 1)
    events, skipped = inspect_logs_module.log_events(eval_log, MAPPING)
    assert events == []
    assert [(s.reason, s.path) for s in skipped] == [("too_large", eval_log)]
    assert f"{others:,} bytes" in skipped[0].detail
    monkeypatch.setattr(inspect_logs_module, "MAX_LOG_READ_BYTES", others)
    assert inspect_logs_module.log_events(eval_log, MAPPING)[0]  # at the bound: read
