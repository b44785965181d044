"""ProjectScylla-shaped experiment directories for the tests, written as its E2E runner writes
them (`run_result.json` with `json.dump(indent=2)`, timing files with `isoformat()`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

JUDGE = "claude-opus-4-5-20251101"


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))


def make_experiment(
    parent: Path,
    experiment_id: str,
    models: list[str] | None = None,
    tiers: list[str] | None = None,
    name: str | None = None,
) -> Path:
    """`<parent>/<timestamp>-<experiment_id>/` with its config and a checkpoint."""
    directory = parent / (name or f"2026-01-23T17-01-08-{experiment_id}")
    write_json(
        directory / "config" / "experiment.json",
        {
            "experiment_id": experiment_id,
            "task_repo": "https://example.invalid/repo",
            "task_commit": "abc123",
            "language": "python",
            "models": models or ["claude-haiku-4-5"],
            "runs_per_subtest": 10,
            "tiers_to_run": tiers or ["T0", "T1"],
            "judge_models": [JUDGE],
            "timeout_seconds": 3600,
        },
    )
    write_json(
        directory / "checkpoint.json",
        {"version": "3.1", "experiment_id": experiment_id, "completed_runs": {}},
    )
    return directory


@dataclass(frozen=True)
class Run:
    """The values a run directory is written with, and the event they must give."""

    tier: str = "T0"
    subtest: str = "00"
    number: int = 1
    passed: bool = True
    score: float = 0.85
    input_tokens: int = 12
    output_tokens: int = 3400
    cache_creation: int = 20000
    cache_read: int = 150000
    cost_usd: float | None = 0.42
    duration_s: float = 310.5
    judge_duration_s: float = 60.4
    ended: datetime = datetime(2026, 1, 23, 17, 5, 12, 123456, tzinfo=UTC)
    root: str = "completed"  # "" for the flat layout

    @property
    def run(self) -> str:
        return f"run_{self.number:02d}"

    def event(self, experiment_id: str, model: str = "claude-haiku-4-5") -> dict[str, Any]:
        """The RunCompleted this run must become."""
        event: dict[str, Any] = {
            "schema_version": 1,
            "run_id": f"{experiment_id}/{self.tier}/{self.subtest}/{self.run}",
            "experiment_id": experiment_id,
            "tier": self.tier,
            "model": model,
            "subtest": self.subtest,
            "run_number": self.number,
            "passed": self.passed,
            "judgment": {"summary": {"weighted_score": self.score}},
            "tokens": {
                "input": self.input_tokens,
                "output": self.output_tokens,
                "cache_creation": self.cache_creation,
                "cache_read": self.cache_read,
            },
            "started_at": _z(self.ended - timedelta(seconds=self.duration_s)),
            "completed_at": _z(self.ended),
        }
        if self.cost_usd is not None:
            event["cost_usd"] = self.cost_usd
        return event

    def result(self) -> dict[str, Any]:
        """`run_result.json` as E2ERunResult.to_dict() writes it."""
        return {
            "run_number": self.number,
            "exit_code": 0,
            "token_stats": {
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "cache_creation_tokens": self.cache_creation,
                "cache_read_tokens": self.cache_read,
            },
            "tokens_input": self.input_tokens + self.cache_read,
            "tokens_output": self.output_tokens,
            "cost_usd": self.cost_usd,
            "duration_seconds": self.duration_s,
            "agent_duration_seconds": self.duration_s - self.judge_duration_s,
            "judge_duration_seconds": self.judge_duration_s,
            "judge_score": self.score,
            "judge_passed": self.passed,
            "judge_grade": "A",
            "judge_reasoning": "…",
            "judges": [
                {
                    "model": JUDGE,
                    "score": self.score,
                    "passed": self.passed,
                    "grade": "A",
                    "reasoning": "…",
                    "judge_number": 1,
                    "is_valid": True,
                    "criteria_scores": {},
                }
            ],
            "workspace_path": "workspace",
            "logs_path": "agent",
            "command_log_path": "agent/command_log.json",
            "criteria_scores": {},
            "baseline_pipeline_summary": None,
        }


def _z(moment: datetime) -> str:
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def run_dir(experiment: Path, run: Run) -> Path:
    return experiment / run.root / run.tier / run.subtest / run.run


def write_run(
    experiment: Path, run: Run, *, result: dict[str, Any] | None = None, finished: bool = True
) -> Path:
    """A run directory: the agent's and judges' files, then `run_result.json` (unless the run
    is not finished)."""
    directory = run_dir(experiment, run)
    agent_end = run.ended - timedelta(seconds=run.judge_duration_s)
    write_json(
        directory / "agent" / "timing.json",
        {
            "agent_duration_seconds": run.duration_s - run.judge_duration_s,
            "measured_at": agent_end.isoformat(),
        },
    )
    write_json(
        directory / "agent" / "result.json",
        {
            "exit_code": 0,
            "stdout": json.dumps({"type": "result", "modelUsage": {}}),
            "stderr": "",
            "token_stats": run.result()["token_stats"],
            "cost_usd": run.cost_usd,
            "api_calls": 7,
        },
    )
    (directory / "workspace").mkdir(parents=True, exist_ok=True)
    (directory / "workspace" / "solution.py").write_text("print('hello')\n")
    write_json(
        directory / "judge" / "timing.json",
        {"judge_duration_seconds": run.judge_duration_s, "measured_at": run.ended.isoformat()},
    )
    if finished:
        write_json(directory / "run_result.json", result if result is not None else run.result())
    return directory


def write_event_as_run(results: Path, event: dict[str, Any], root: str = "completed") -> Path:
    """A RunCompleted event written back as the run directory ProjectScylla would have left
    (the experiment is created on first use): `watch` and `replay DIR` must give the event
    back."""
    experiment = results / f"2026-01-05T09-00-00-{event['experiment_id']}"
    if not experiment.exists():
        make_experiment(
            results, event["experiment_id"], models=[event["model"]], name=experiment.name
        )
    started = datetime.fromisoformat(event["started_at"])
    ended = datetime.fromisoformat(event["completed_at"])
    tokens = event["tokens"]
    run = Run(
        tier=event["tier"],
        subtest=event["subtest"],
        number=event["run_number"],
        passed=event["passed"],
        score=event["judgment"]["summary"]["weighted_score"],
        input_tokens=tokens["input"],
        output_tokens=tokens["output"],
        cache_creation=tokens.get("cache_creation", 0),
        cache_read=tokens.get("cache_read", 0),
        cost_usd=event.get("cost_usd"),
        duration_s=(ended - started).total_seconds(),
        judge_duration_s=0.0,
        ended=ended,
        root=root,
    )
    assert event["run_id"] == f"{event['experiment_id']}/{run.tier}/{run.subtest}/{run.run}"
    return write_run(experiment, run)
