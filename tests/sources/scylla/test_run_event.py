"""A ProjectScylla run directory as a RunCompleted event, field by field, and every way a run
directory can be malformed."""

import json
import math
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schemas.run_completed import RunCompleted
from stream_app.sources.scylla.layout import RunLocation, experiment_dirs, find_runs, locate
from stream_app.sources.scylla.run_event import Experiment, MalformedRun, read_experiment, run_event
from tests.scylla_dirs import Run, make_experiment, run_dir, write_json, write_run

EXPERIMENT = Experiment("test-001", ("claude-haiku-4-5",))


def location(experiment: Path, run: Run) -> RunLocation:
    return RunLocation(experiment, run.root, run.tier, run.subtest, run.run)


def event_of(experiment: Path, run: Run, exp: Experiment = EXPERIMENT) -> dict[str, object]:
    mapped = run_event(location(experiment, run), exp)
    assert mapped.run_id == f"test-001/{run.tier}/{run.subtest}/{run.run}"
    assert mapped.experiment_id == exp.experiment_id
    RunCompleted.model_validate_json(mapped.payload)  # the contract holds
    event: dict[str, object] = json.loads(mapped.payload)
    return event


@pytest.mark.parametrize("root", ["completed", ""])
def test_every_field(tmp_path: Path, root: str) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run(tier="T3", subtest="07", number=4, passed=False, score=0.3125, root=root)
    write_run(experiment, run)
    assert event_of(experiment, run) == run.event("test-001")


def test_started_is_completed_minus_duration(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    end = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timedelta_tz(2))
    run = Run(ended=end, duration_s=90.25)
    write_run(experiment, run)
    event = event_of(experiment, run)
    assert event["completed_at"] == "2026-03-01T12:00:00+02:00"  # the judges' offset is kept
    assert event["started_at"] == "2026-03-01T11:58:29.750000+02:00"


def timedelta_tz(hours: int):  # type: ignore[no-untyped-def]
    from datetime import timezone

    return timezone(timedelta(hours=hours))


def test_passed_is_the_vote_not_the_score(tmp_path: Path) -> None:
    """A high score the judges voted down stays a failure, and a low one they passed a pass."""
    experiment = make_experiment(tmp_path, "test-001")
    failed = Run(number=1, passed=False, score=0.95)
    passed = Run(number=2, passed=True, score=0.05)
    write_run(experiment, failed)
    write_run(experiment, passed)
    assert event_of(experiment, failed)["passed"] is False
    assert event_of(experiment, passed)["passed"] is True


def test_null_cost_is_left_to_pricing_and_cache_counts_default(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run(cost_usd=None)
    result = run.result()
    del result["token_stats"]["cache_creation_tokens"], result["token_stats"]["cache_read_tokens"]
    write_run(experiment, run, result=result)
    event = event_of(experiment, run)
    assert "cost_usd" not in event
    assert event["tokens"] == {"input": 12, "output": 3400, "cache_creation": 0, "cache_read": 0}


def test_tokens_from_agent_result_when_run_result_has_none(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    result = run.result()
    del result["token_stats"]
    write_run(experiment, run, result=result)
    assert event_of(experiment, run)["tokens"] == run.event("test-001")["tokens"]


def test_completed_from_agent_timing_then_file_time(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    directory = write_run(experiment, run)
    (directory / "judge" / "timing.json").unlink()
    # agent's measured_at (ended - judging) plus judge_duration_seconds
    assert event_of(experiment, run)["completed_at"] == run.event("test-001")["completed_at"]
    (directory / "agent" / "timing.json").unlink()
    import os

    os.utime(directory / "run_result.json", (1_767_000_000.5, 1_767_000_000.5))
    event = event_of(experiment, run)
    assert event["completed_at"] == "2025-12-29T09:20:00.500000Z"


def test_naive_timestamp_is_utc(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    directory = write_run(experiment, run)
    write_json(
        directory / "judge" / "timing.json",
        {"judge_duration_seconds": 1.0, "measured_at": "2026-01-23T17:05:12"},
    )
    assert event_of(experiment, run)["completed_at"] == "2026-01-23T17:05:12Z"


def test_model_of_a_several_model_experiment(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    directory = write_run(experiment, run)
    exp = Experiment("test-001", ("claude-sonnet-4-5-20250929", "claude-haiku-4-5"))
    assert event_of(experiment, run, exp)["model"] == "claude-sonnet-4-5-20250929"  # the first
    usage = {
        "claude-sonnet-4-5-20250929": {"outputTokens": 10},
        "claude-haiku-4-5": {"outputTokens": 3000},
        "claude-opus-4-5": {"outputTokens": 99999},  # not one of the experiment's models
    }
    write_json(
        directory / "agent" / "result.json",
        {"stdout": json.dumps({"modelUsage": usage}), "token_stats": {}},
    )
    assert event_of(experiment, run, exp)["model"] == "claude-haiku-4-5"


def test_read_experiment(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-007", models=["m-1"])
    assert read_experiment(experiment) == Experiment("test-007", ("m-1",))
    write_json(experiment / "config" / "experiment.json", {"models": ["m-1"]})
    assert read_experiment(experiment).experiment_id == "test-007"  # from checkpoint.json
    for config, reason in [
        ({"experiment_id": "", "models": ["m"]}, "invalid_config"),
        ({"experiment_id": "x", "models": []}, "invalid_config"),
        ({"experiment_id": "x", "models": [1]}, "invalid_config"),
        ([], "invalid_json"),
    ]:
        write_json(experiment / "config" / "experiment.json", config)
        with pytest.raises(MalformedRun) as caught:
            read_experiment(experiment)
        assert caught.value.reason == reason
    (experiment / "config" / "experiment.json").write_text("{")
    with pytest.raises(MalformedRun, match="invalid_json"):
        read_experiment(experiment)


def _corrupt(result: dict[str, object], **changes: object) -> dict[str, object]:
    changed = dict(result)
    for key, value in changes.items():
        if value is ...:
            del changed[key]
        else:
            changed[key] = value
    return changed


@pytest.mark.parametrize(
    ("changes", "reason", "detail"),
    [
        ({"judge_score": 1.5}, "out_of_range", "judge_score 1.5 is outside [0, 1]"),
        ({"judge_score": -0.01}, "out_of_range", "outside [0, 1]"),
        ({"judge_score": None}, "missing_field", "judge_score is missing"),
        ({"judge_score": "0.5"}, "invalid_field", "judge_score must be a finite number"),
        ({"judge_score": True}, "invalid_field", "judge_score must be a finite number"),
        ({"judge_passed": ...}, "missing_field", "judge_passed"),
        ({"judge_passed": 1}, "invalid_field", "judge_passed must be true or false"),
        ({"run_number": 2}, "invalid_field", "run_number 2 in run_01"),
        ({"run_number": "1"}, "invalid_field", "run_number must be an integer"),
        ({"duration_seconds": -1}, "out_of_range", "duration_seconds -1.0 < 0"),
        ({"duration_seconds": ...}, "missing_field", "duration_seconds is missing"),
        ({"duration_seconds": 1e300}, "out_of_range", "duration_seconds"),
        ({"cost_usd": -0.5}, "invalid_event", "cost_usd"),
        ({"cost_usd": 1e12}, "invalid_event", "cost_usd"),
        (
            {"token_stats": {"input_tokens": 1.5, "output_tokens": 1}},
            "invalid_field",
            "input_tokens",
        ),
        (
            {"token_stats": {"input_tokens": -1, "output_tokens": 1}},
            "invalid_event",
            "tokens.input",
        ),
        ({"token_stats": {"output_tokens": 1}}, "invalid_field", "input_tokens"),
        ({"token_stats": "many"}, "missing_field", "token_stats"),
    ],
)
def test_malformed_run_result(
    tmp_path: Path, changes: dict[str, object], reason: str, detail: str
) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    directory = write_run(experiment, run, result=_corrupt(run.result(), **changes))
    (directory / "agent" / "result.json").unlink()  # no second source of tokens
    with pytest.raises(MalformedRun) as caught:
        run_event(location(experiment, run), EXPERIMENT)
    assert caught.value.reason == reason
    assert detail in caught.value.detail


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "invalid_json"),
        ('{"run_number": 1,', "invalid_json"),
        ("[1, 2]", "invalid_json"),
        ('{"judge_score": NaN}', "missing_field"),  # Python's json reads NaN; then no run_number
    ],
)
def test_unparseable_run_result(tmp_path: Path, text: str, reason: str) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    directory = write_run(experiment, run)
    (directory / "run_result.json").write_text(text)
    with pytest.raises(MalformedRun) as caught:
        run_event(location(experiment, run), EXPERIMENT)
    assert caught.value.reason in (reason, "invalid_field")


def test_nan_score_is_malformed(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    directory = write_run(experiment, run)
    text = json.dumps(run.result()).replace('"judge_score": 0.85', '"judge_score": NaN')
    (directory / "run_result.json").write_text(text)
    with pytest.raises(MalformedRun, match="judge_score must be a finite number"):
        run_event(location(experiment, run), EXPERIMENT)
    assert math.isnan(json.loads(text)["judge_score"])


@pytest.mark.parametrize(
    ("timing", "detail"),
    [
        ({"measured_at": "yesterday"}, "not ISO-8601"),
        ({"measured_at": 1767000000}, "must be an ISO-8601 string"),
        ({}, "must be an ISO-8601 string"),
        ({"measured_at": "0001-01-01T00:00:00+00:00"}, "out_of_range"),
        ({"measured_at": "1970-01-01T00:01:00+00:00"}, "invalid_event: started_at"),
    ],
)
def test_malformed_timing(tmp_path: Path, timing: dict[str, object], detail: str) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    directory = write_run(experiment, run)
    write_json(directory / "judge" / "timing.json", timing)
    with pytest.raises(MalformedRun, match=detail):
        run_event(location(experiment, run), EXPERIMENT)


def test_oversized_file_is_not_read(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    directory = write_run(experiment, run)
    with (directory / "run_result.json").open("w") as file:
        file.write('{"pad": "' + "x" * (17 * 1024 * 1024) + '"}')
    with pytest.raises(MalformedRun) as caught:
        run_event(location(experiment, run), EXPERIMENT)
    assert caught.value.reason == "too_large"


def test_layout_finds_runs_in_both_layouts_and_locates_paths(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    flat = Run(tier="T0", subtest="00", number=1, root="")
    moved = Run(tier="T10", subtest="01", number=12, root="completed")
    unfinished = Run(tier="T2", subtest="00", number=3, root="completed")
    for run in (flat, moved):
        write_run(experiment, run)
    write_run(experiment, unfinished, finished=False)
    # Not runs: in_progress/, a .failed run, a hidden subtest, a non-tier directory.
    write_run(experiment, Run(root="in_progress"))
    (experiment / "completed" / "T0" / "00" / ".failed" / "run_02").mkdir(parents=True)
    (experiment / "T1" / ".cache" / "run_01").mkdir(parents=True)
    (experiment / "tiers" / "T0" / "00" / "run_01").mkdir(parents=True)
    found = list(find_runs(experiment))
    assert found == [location(experiment, r) for r in (flat, moved, unfinished)]
    assert found[1].run_id("e") == "e/T10/01/run_12"
    assert found[1].number == 12
    inside = run_dir(experiment, moved) / "judge" / "timing.json"
    assert locate(inside, [tmp_path / "other", experiment]) == location(experiment, moved)
    assert locate(experiment / "checkpoint.json", [experiment]) is None
    assert locate(experiment / "T0" / ".x" / "run_01", [experiment]) is None


def test_results_folder_holds_experiments(tmp_path: Path) -> None:
    first = make_experiment(tmp_path, "a")
    second = make_experiment(tmp_path, "b")
    (tmp_path / "repos").mkdir()  # ProjectScylla's shared clones sit beside the experiments
    assert experiment_dirs([tmp_path]) == [first, second]
    assert experiment_dirs([second]) == [second]
    assert experiment_dirs([tmp_path / "missing"]) == []


def test_the_run_number_must_match_the_directory(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run(number=100)
    write_run(experiment, run)
    assert event_of(experiment, run)["run_id"] == "test-001/T0/00/run_100"
    assert datetime.fromisoformat(str(event_of(experiment, run)["completed_at"])).tzinfo == UTC


@pytest.mark.parametrize(
    "stdout",
    [
        json.dumps({"modelUsage": {"claude-haiku-4-5": {"outputTokens": "lots"}}}),
        "[" * 200_000,
        json.dumps({"modelUsage": ["claude-haiku-4-5"]}),
        json.dumps([1]),
    ],
)
def test_odd_agent_output_falls_back_to_the_first_model(tmp_path: Path, stdout: str) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    run = Run()
    directory = write_run(experiment, run)
    write_json(directory / "agent" / "result.json", {"stdout": stdout})
    exp = Experiment("test-001", ("claude-sonnet-4-5-20250929", "claude-haiku-4-5"))
    assert event_of(experiment, run, exp)["model"] == "claude-sonnet-4-5-20250929"


def test_a_name_that_is_not_utf8_is_malformed(tmp_path: Path) -> None:
    experiment = make_experiment(tmp_path, "test-001")
    name = os.fsdecode(b"\xff")
    run = Run(subtest=name)
    write_run(experiment, run)
    with pytest.raises(MalformedRun, match="invalid_name"):
        run_event(location(experiment, run), EXPERIMENT)


def test_which_changed_paths_may_matter(tmp_path: Path) -> None:
    from stream_app.sources.scylla.layout import may_matter

    root = tmp_path / "results"
    experiment = root / "2026-01-23T17-01-08-exp"
    run = experiment / "completed" / "T0" / "05" / "run_01"
    for path in [
        run / "run_result.json",
        run / "judge" / "timing.json",
        experiment / "config" / "experiment.json",
        run,
        run.parent,  # a new subtest directory: files in it may come before its watch
        run.parent.parent,
        experiment / "completed",
        experiment,  # a new experiment in the results folder
    ]:
        assert may_matter(path, {root}), path
    for path in [
        run / "workspace" / "src" / "main.py",
        run / "agent" / "stdout.log",
        run / "workspace" / "node_modules",
    ]:
        assert not may_matter(path, {root}), path
