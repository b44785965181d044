"""`stream-app replay` as a user runs it: a real subprocess of the installed console script."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SAMPLE_FILE, encode, make_event
from tests.scylla_dirs import Run, make_experiment, write_event_as_run, write_run

STREAM_APP = shutil.which("stream-app") or str(Path(sys.executable).parent / "stream-app")


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [STREAM_APP, *args], input=stdin, capture_output=True, timeout=60, check=False
    )


def test_replay_file() -> None:
    proc = run("replay", str(SAMPLE_FILE))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {
        "tiers",
        "cross_tier",
        "suites",
        "rejected",
        "ignored",
        "retired",
        "skipped_runs",
    }
    assert doc["retired"] == []
    assert doc["skipped_runs"] == []
    assert len(doc["tiers"]) == 21
    assert [c["experiment_id"] for c in doc["cross_tier"]] == ["test-001", "test-002", "test-003"]
    assert doc["ignored"] == {"duplicate": 0, "late": 0}
    assert proc.stderr == b""


def test_replay_stdin_strict_and_rejections() -> None:
    payload = encode(make_event()) + b"\n\nnot json\n" + encode(make_event(passed=1)) + b"\n"
    proc = run("replay", "-", stdin=payload)
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert [(r["line"], r["reason"]) for r in doc["rejected"]] == [
        (3, "invalid_json"),
        (4, "schema"),
    ]
    assert b"2 line(s) rejected" in proc.stderr
    strict = run("replay", "--strict", "-", stdin=payload)
    assert strict.returncode == 1
    clean = run("replay", "--strict", "-", stdin=encode(make_event()))
    assert clean.returncode == 0


def test_config_file_changes_the_result(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("window_size: 3\npass_at_k: {k_values: [1, 2]}\n")
    doc = json.loads(run("replay", str(SAMPLE_FILE), "--config", str(cfg)).stdout)
    assert {t["runs"] for t in doc["tiers"]} == {3}
    assert set(doc["tiers"][0]["pass_at_k"]) == {"1", "2"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "/nonexistent.jsonl"], b"cannot read /nonexistent.jsonl"),
        (["replay", "-", "--config", "/nonexistent.yaml"], b"does not exist"),
        (["replay", "/", "/nonexistent.jsonl"], b"/nonexistent.jsonl is not a directory"),
        (["watch", "/nonexistent"], b"stream-app watch: error: /nonexistent is not a directory"),
        (
            ["replay", "/proc/self/fd"],
            b"no ProjectScylla experiment, inspect_ai log or Harbor trial in /proc/self/fd",
        ),
    ],
)
def test_user_errors_are_one_line(args: list[str], message: bytes) -> None:
    proc = run(*args, stdin=b"")
    assert proc.returncode == 2
    assert message in proc.stderr
    assert b"Traceback" not in proc.stderr
    assert proc.stderr.count(b"\n") == 1


def test_module_entry_point_and_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "stream_app", "--version"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith(b"evalstream ")


def test_replay_never_aborts_on_inputs_that_overflowed_the_core() -> None:
    """Issue 9, case 3: these lines made replay exit 1 with a traceback and nothing on stdout."""
    lines = [
        encode(make_event(run_id="a", cost_usd=0.0)),
        encode(make_event(run_id="b", cost_usd=1e155)),
        encode(make_event(run_id="c", completed_at="0001-01-01T00:00:00+14:00")),
        encode(make_event(run_id="d", completed_at="9999-12-31T23:59:59-12:00")),
        encode(make_event(run_id="e", completed_at="1767603660")),
        encode(make_event(run_id="f", completed_at="2026-01-05T09:02:00Z")),
    ]
    proc = run("replay", "-", stdin=b"\n".join(lines) + b"\n")
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert [(r["line"], r["reason"]) for r in doc["rejected"]] == [
        (2, "schema"),
        (3, "schema"),
        (4, "schema"),
        (5, "schema"),
    ]
    assert doc["tiers"][0]["run_ids"] == ["a", "f"]


def test_replay_retire_retires_by_event_time_only_when_asked() -> None:
    old = make_event(run_id="old-1", experiment_id="old", completed_at="2026-01-01T00:00:00Z")
    new = make_event(run_id="new-1", experiment_id="new", completed_at="2026-02-01T00:00:00Z")
    for event in (old, new):
        event["started_at"] = event["completed_at"]
    stdin = encode(old) + b"\n" + encode(new) + b"\n"
    plain = json.loads(run("replay", "-", stdin=stdin).stdout)
    assert {t["experiment_id"] for t in plain["tiers"]} == {"old", "new"}
    retired = json.loads(run("replay", "-", "--retire", stdin=stdin).stdout)
    assert {t["experiment_id"] for t in retired["tiers"]} == {"new"}
    assert retired["retired"] == [{"experiment_id": "old", "at": "2026-02-01T00:00:00Z"}]


def test_replay_experiment_directories(tmp_path: Path) -> None:
    """`stream-app replay DIR`: a finished ProjectScylla experiment's tier table; a malformed run
    is reported on stderr and in `skipped_runs`, and fails `--strict`."""
    for line in SAMPLE_FILE.read_bytes().splitlines()[:40]:
        write_event_as_run(tmp_path, json.loads(line))
    experiment = tmp_path / "2026-01-05T09-00-00-test-001"
    bad = write_run(experiment, Run(tier="T3", number=9), result={"run_number": 9})
    proc = run("replay", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    want = json.loads(
        run("replay", "-", stdin=b"\n".join(SAMPLE_FILE.read_bytes().splitlines()[:40])).stdout
    )
    assert doc["tiers"] == want["tiers"]
    assert doc["cross_tier"] == want["cross_tier"]
    assert doc["skipped_runs"] == [
        {
            "path": str(bad),
            "reason": "missing_field",
            "detail": "run_result.json: judge_passed must be true or false",
        }
    ]
    assert proc.stderr.decode() == (
        f"stream-app replay: skipped {bad}: missing_field: "
        "run_result.json: judge_passed must be true or false\n"
    )
    assert run("replay", "--strict", str(experiment)).returncode == 1
    # Two directories at once: the experiments of both.
    other = make_experiment(tmp_path / "more", "exp-z")
    write_run(other, Run())
    both = json.loads(run("replay", str(experiment), str(tmp_path / "more")).stdout)
    assert {t["experiment_id"] for t in both["tiers"]} == {"test-001", "exp-z"}
