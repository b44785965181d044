"""Harbor jobs as runs, from trial `result.json` files shaped as Harbor writes them (its
`TrialResult`, `AgentInfo`, `AgentContext`, `VerifierResult` and `ExceptionInfo` fields): a passed
trial, a failed one, one that raised, one with no reward, a tier from the user's mapping
(docs/operations.md, 'From Harbor')."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from stream_app.errors import UserError
from stream_app.sources.directories import directory_events
from stream_app.sources.harbor_trial import Refused, run_event
from stream_app.sources.run_mapping import RunMapping
from tests.helpers import REPO

TIERS = {"claude-code/anthropic/claude-sonnet-4-5": "T1", "oracle": "T0"}
MAPPING = RunMapping(tiers=TIERS)


def trial(name: str, reward: float | None = 1.0, **change: Any) -> dict[str, Any]:
    """A trial's result.json as Harbor writes it (times local, without an offset)."""
    result: dict[str, Any] = {
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        "task_name": name.split("__", maxsplit=1)[0],
        "trial_name": name,
        "trial_uri": f"file:///jobs/job-1/{name}",
        "task_id": {"path": f"tasks/{name.split('__', maxsplit=1)[0]}"},
        "task_checksum": "abc",
        "config": {"agent": {"name": "claude-code"}},
        "agent_info": {
            "name": "claude-code",
            "version": "2.0.0",
            "model_info": {"name": "claude-sonnet-4-5", "provider": "anthropic"},
        },
        "agent_result": {
            "n_input_tokens": 1500,
            "n_cache_tokens": 1000,
            "n_output_tokens": 200,
            "cost_usd": 0.0123,
        },
        "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
        "exception_info": None,
        "started_at": "2026-11-29T10:00:00.000001",
        "finished_at": "2026-11-29T10:04:00.5",
    }
    return result | change


def test_a_trial_is_one_run_of_its_task() -> None:
    event = run_event(trial("hello-world__AbC"), MAPPING)
    assert event["run_id"].startswith("harbor/")
    assert (event["experiment_id"], event["tier"], event["passed"]) == ("hello-world", "T1", True)
    assert event["model"] == "anthropic/claude-sonnet-4-5"
    assert event["suite"] == "claude-code/anthropic/claude-sonnet-4-5"
    assert event["tokens"] == {"input": 500, "output": 200, "cache_read": 1000}  # cache apart
    assert event["cost_usd"] == 0.0123
    assert event["started_at"] == "2026-11-29T10:00:00.000001Z"  # no offset: UTC


def test_a_trial_that_raised_fails_and_one_with_no_reward_is_refused() -> None:
    raised = trial(
        "fix-bug__x",
        reward=None,
        exception_info={
            "exception_type": "AgentTimeoutError",
            "exception_message": "timed out",
            "exception_traceback": "...",
            "occurred_at": "2026-11-29T10:03:00",
        },
    )
    event = run_event(raised, MAPPING)
    assert event["passed"] is False
    assert event["judgment"]["summary"]["weighted_score"] == 0.0
    assert event["error"] == "AgentTimeoutError: timed out"
    late = run_event(raised | {"verifier_result": {"rewards": {"reward": 1.0}}}, MAPPING)
    assert (late["passed"], late["judgment"]["summary"]["weighted_score"]) == (False, 0.0)
    with pytest.raises(Refused, match="no_reward"):
        run_event(trial("fix-bug__y", reward=None), MAPPING)
    with pytest.raises(Refused, match="no_tier"):
        run_event(trial("fix-bug__z"), RunMapping())
    assert run_event(trial("fix-bug__w", reward=0.4), MAPPING)["passed"] is False
    lenient = RunMapping(tiers=TIERS, pass_at=0.4)  # the `pass_score` setting
    assert run_event(trial("fix-bug__w", reward=0.4), lenient)["passed"] is True


def write_job(jobs: Path, results: list[dict[str, Any]]) -> None:
    job = jobs / "2026-11-29__10-00-00"
    for result in results:
        (job / result["trial_name"]).mkdir(parents=True)
        (job / result["trial_name"] / "result.json").write_text(json.dumps(result))
    (job / "result.json").write_text(json.dumps({"id": "job", "n_total_trials": len(results)}))


def test_replay_of_a_jobs_directory(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    results = [trial(f"hello-world__{n}", reward=float(n % 2)) for n in range(6)]
    results.append(trial("hello-world__nr", reward=None))  # refused: no reward
    write_job(jobs, results)
    env = {**os.environ, "EVALSTREAM_TIERS": json.dumps(TIERS)}
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", "replay", str(jobs)],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (tier,) = report["tiers"]
    assert (tier["tier"], tier["cumulative"]["runs"], tier["cumulative"]["passes"]) == ("T1", 6, 3)
    assert [s["reason"] for s in report["skipped_runs"]] == ["no_reward"]
    lenient = subprocess.run(  # the pass_score setting: a reward of 0 passes too
        [sys.executable, "-m", "stream_app", "replay", str(jobs)],
        cwd=REPO,
        env={**env, "EVALSTREAM_PASS_SCORE": "0"},
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert json.loads(lenient.stdout)["tiers"][0]["cumulative"]["passes"] == 6


def test_hostile_trials_are_skipped_with_their_reason_never_a_crash(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    good = trial("ok__1")
    hostile = [
        trial("inf__1", agent_result={"n_input_tokens": float("inf")}),
        trial("list__1", agent_info=["x"]),
        trial("nan__1", reward=float("nan")),
    ]
    write_job(jobs, [good, *hostile])
    (jobs / "2026-11-29__10-00-00" / "broken__1").mkdir()
    (jobs / "2026-11-29__10-00-00" / "broken__1" / "result.json").write_text("{not json")
    os.mkfifo(jobs / "fifo.json")  # nothing blocks on it
    events, skipped = directory_events([jobs], MAPPING)
    assert len(events) == 1
    reasons = sorted(s.reason for s in skipped)
    assert reasons == ["bad_reward", "malformed", "malformed", "unreadable_result"]


def test_a_job_s_own_result_alone_is_no_trial(tmp_path: Path) -> None:
    """A jobs directory whose trials are not written yet holds no run: said as for a directory
    of no kind, not replayed as empty; next to trials, the job's own result makes nothing."""
    (tmp_path / "jobs" / "2026-11-29__10-00-00").mkdir(parents=True)
    write_job(tmp_path / "jobs", [])
    with pytest.raises(UserError, match="no ProjectScylla experiment, inspect_ai log or Harbor"):
        directory_events([tmp_path / "jobs"], MAPPING)
    write_job(tmp_path / "more", [trial("a__1")])
    events, skipped = directory_events([tmp_path / "more"], MAPPING)
    assert (len(events), skipped) == (1, [])
