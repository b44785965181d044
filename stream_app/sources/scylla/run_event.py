"""One ProjectScylla run directory as a `RunCompleted` event.

The mapping, field by field, and what is decided where a directory is silent or odd:
docs/operations.md, 'From ProjectScylla'. Anything that does not fit the contract makes the run
malformed (`MalformedRun`), with the reason."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from schemas.run_completed import RunCompleted
from schemas.timestamp import format_timestamp
from stream_app import bounded_json
from stream_app.sources.scylla.layout import CHECKPOINT_FILE, CONFIG_FILE, RUN_RESULT, RunLocation
from stream_app.sources.skipped import NoEvent

MAX_FILE_BYTES: Final = 16 * 1024 * 1024
"""A run's JSON file larger than this is malformed rather than read (agent output can be large,
but not this large)."""


class MalformedRun(NoEvent):
    """A run (or experiment) directory that cannot become an event."""


@dataclass(frozen=True)
class Experiment:
    """What the experiment's config says about every run."""

    experiment_id: str
    models: tuple[str, ...]


@dataclass(frozen=True)
class RunEvent:
    """A run as published: `payload` is the event's JSON, validated against the contract."""

    run_id: str
    experiment_id: str
    completed_at: datetime
    payload: bytes
    fingerprint: tuple[tuple[int, int], ...] = ()  # (mtime, size) of the files it was made from

    @property
    def order(self) -> tuple[datetime, str]:
        """The window's order: (completed_at, run_id)."""
        return self.completed_at, self.run_id

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> RunEvent:
        """An event a harness source made as JSON values (inspect_ai, Harbor), as published:
        compact JSON, in the same bytes whichever path (hook, `watch`, `replay`) sends it."""
        payload = json.dumps(event, separators=(",", ":")).encode()
        completed = datetime.fromisoformat(event["completed_at"])
        return cls(event["run_id"], event["experiment_id"], completed, payload)


def read_json(path: Path) -> Any:
    """A JSON document; `MalformedRun` when it is unreadable, too large or not JSON."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise MalformedRun("missing_file", f"{path.name} is missing") from None
    except OSError as exc:
        raise MalformedRun("unreadable", f"{path.name}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise MalformedRun("too_large", f"{path.name} is over {MAX_FILE_BYTES} bytes")
    try:
        return bounded_json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MalformedRun("invalid_json", f"{path.name}: {exc}") from None


def _object(path: Path) -> dict[str, Any]:
    value = read_json(path)
    if not isinstance(value, dict):
        raise MalformedRun("invalid_json", f"{path.name} is not a JSON object")
    return value


def read_experiment(experiment_dir: Path) -> Experiment:
    """The experiment's id and models, from `config/experiment.json` (the id from
    `checkpoint.json` when the config has none)."""
    config = _object(experiment_dir / CONFIG_FILE)
    experiment_id = config.get("experiment_id")
    if experiment_id is None and (experiment_dir / CHECKPOINT_FILE).is_file():
        experiment_id = _object(experiment_dir / CHECKPOINT_FILE).get("experiment_id")
    if not isinstance(experiment_id, str) or not 1 <= len(experiment_id) <= 200:
        raise MalformedRun("invalid_config", "experiment_id must be a string of 1-200 characters")
    models = config.get("models")
    if isinstance(models, str):
        models = [models]
    if not isinstance(models, list) or not models or not all(isinstance(m, str) for m in models):
        raise MalformedRun("invalid_config", "models must be a non-empty list of model names")
    return Experiment(experiment_id, tuple(models))


def _number(doc: dict[str, Any], name: str, *, file: str = RUN_RESULT) -> float:
    value = doc.get(name)
    if value is None:
        raise MalformedRun("missing_field", f"{file}: {name} is missing")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MalformedRun("invalid_field", f"{file}: {name} must be a finite number: {value!r}")
    return float(value)


def _timestamp(doc: dict[str, Any], file: str) -> datetime:
    value = doc.get("measured_at")
    if not isinstance(value, str):
        raise MalformedRun("invalid_field", f"{file}: measured_at must be an ISO-8601 string")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise MalformedRun(
            "invalid_field", f"{file}: measured_at is not ISO-8601: {value[:60]!r}"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def completed_at(run_dir: Path, result: dict[str, Any]) -> datetime:
    """When the run ended: the judges' `measured_at`, else the agent's plus the judging time,
    else the modification time of `run_result.json`."""
    judge = run_dir / "judge" / "timing.json"
    if judge.is_file():
        return _timestamp(_object(judge), "judge/timing.json")
    agent = run_dir / "agent" / "timing.json"
    if agent.is_file():
        judging = result.get("judge_duration_seconds")
        seconds = _number(result, "judge_duration_seconds") if judging is not None else 0.0
        if seconds < 0:
            raise MalformedRun("out_of_range", f"{RUN_RESULT}: judge_duration_seconds < 0")
        try:
            return _timestamp(_object(agent), "agent/timing.json") + timedelta(seconds=seconds)
        except OverflowError:
            raise MalformedRun("out_of_range", f"{RUN_RESULT}: judge_duration_seconds") from None
    try:
        return datetime.fromtimestamp((run_dir / RUN_RESULT).stat().st_mtime, UTC)
    except OSError as exc:
        raise MalformedRun("unreadable", f"{RUN_RESULT}: {exc.strerror or exc}") from None


def _tokens(run_dir: Path, result: dict[str, Any]) -> dict[str, Any]:
    stats = result.get("token_stats")
    file = RUN_RESULT
    if stats is None and (run_dir / "agent" / "result.json").is_file():
        stats, file = (
            _object(run_dir / "agent" / "result.json").get("token_stats"),
            "agent/result.json",
        )
    if not isinstance(stats, dict):
        raise MalformedRun("missing_field", f"{RUN_RESULT}: token_stats is missing")
    tokens: dict[str, Any] = {}
    for name, field, required in (
        ("input", "input_tokens", True),
        ("output", "output_tokens", True),
        ("cache_creation", "cache_creation_tokens", False),
        ("cache_read", "cache_read_tokens", False),
    ):
        value = stats.get(field)
        if value is None and not required:
            value = 0
        if isinstance(value, bool) or not isinstance(value, int):
            raise MalformedRun(
                "invalid_field", f"{file}: token_stats.{field} must be an integer: {value!r}"
            )
        tokens[name] = value
    return tokens


def _model(run_dir: Path, experiment: Experiment) -> str:
    """The config's only model; with several, the one the agent's CLI output used most."""
    if len(experiment.models) == 1:
        return experiment.models[0]
    try:
        stdout = _object(run_dir / "agent" / "result.json").get("stdout")
        usage = bounded_json.loads(stdout).get("modelUsage") if isinstance(stdout, str) else None
    except (MalformedRun, ValueError, AttributeError, RecursionError):
        usage = None
    used = []
    if isinstance(usage, dict):
        for name, value in usage.items():
            tokens = value.get("outputTokens") if isinstance(value, dict) else None
            if name in experiment.models and isinstance(tokens, int | float):
                used.append((tokens, name))
    return str(max(used)[1]) if used else experiment.models[0]


def run_event(
    location: RunLocation,
    experiment: Experiment,
    fingerprint: tuple[tuple[int, int], ...] = (),
) -> RunEvent:
    """The event of a finished run; `MalformedRun` when the directory does not make one."""
    run_dir = location.path
    for name in (location.tier, location.subtest, location.run):
        try:
            name.encode()
        except UnicodeEncodeError:
            raise MalformedRun("invalid_name", "a directory name is not UTF-8") from None
    result = _object(run_dir / RUN_RESULT)
    run_number = result.get("run_number")
    if isinstance(run_number, bool) or not isinstance(run_number, int):
        raise MalformedRun("invalid_field", f"{RUN_RESULT}: run_number must be an integer")
    if run_number != location.number:
        raise MalformedRun(
            "invalid_field", f"{RUN_RESULT}: run_number {run_number} in {location.run}"
        )
    passed = result.get("judge_passed")
    if not isinstance(passed, bool):
        raise MalformedRun(
            "missing_field" if passed is None else "invalid_field",
            f"{RUN_RESULT}: judge_passed must be true or false",
        )
    score = _number(result, "judge_score")
    if not 0.0 <= score <= 1.0:
        raise MalformedRun("out_of_range", f"{RUN_RESULT}: judge_score {score} is outside [0, 1]")
    duration = _number(result, "duration_seconds")
    if duration < 0:
        raise MalformedRun("out_of_range", f"{RUN_RESULT}: duration_seconds {duration} < 0")
    cost = result.get("cost_usd")
    if cost is not None:
        cost = _number(result, "cost_usd")
    end = completed_at(run_dir, result)
    try:
        start = end - timedelta(seconds=duration)
    except OverflowError:
        raise MalformedRun("out_of_range", f"{RUN_RESULT}: duration_seconds {duration}") from None
    run_id = location.run_id(experiment.experiment_id)
    event: dict[str, Any] = {
        "schema_version": 1,
        "run_id": run_id,
        "experiment_id": experiment.experiment_id,
        "tier": location.tier,
        "model": _model(run_dir, experiment),
        "subtest": location.subtest,
        "run_number": run_number,
        "passed": passed,
        "judgment": {"summary": {"weighted_score": score}},
        "tokens": _tokens(run_dir, result),
        "started_at": _format(start),
        "completed_at": _format(end),
    }
    if cost is not None:
        event["cost_usd"] = cost
    payload = json.dumps(event, separators=(",", ":")).encode()
    try:
        checked = RunCompleted.model_validate_json(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MalformedRun("invalid_event", f"{where}: {first['msg']}") from None
    return RunEvent(run_id, experiment.experiment_id, checked.completed_at, payload, fingerprint)


def _format(moment: datetime) -> str:
    try:
        return format_timestamp(moment)
    except (ValueError, OverflowError):
        raise MalformedRun("out_of_range", f"timestamp {moment!r} is out of range") from None
