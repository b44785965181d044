"""`stream-app backtest` as a user runs it: a real subprocess of the installed console script,
on the bundled real runs, synthetic drops, experiment directories and stdin."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from schemas.backtest_report import BacktestReport
from stream_app.synthetic import SCORE_DROP, Drop, synthetic_events, synthetic_lines
from tests.scylla_dirs import write_event_as_run

# One worker runs the module: its fixtures are made once, not once per pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("cli-backtest")

STREAM_APP = shutil.which("stream-app") or str(Path(sys.executable).parent / "stream-app")
REAL_RUNS = Path(__file__).resolve().parents[2] / "stream_app" / "data" / "scylla-runs.jsonl"
RUNS = 21 * 300
"""300 runs a tier: the drop, from the 150th, pages 10 (pass rate) or 32 (score) runs later,
well before the end; more runs would only slow each backtest of the file."""


def run(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EVALSTREAM_")}
    return subprocess.run(
        [STREAM_APP, *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        env={**full_env, **(env or {})},
    )


def _write(path: Path, drop: Drop) -> Path:
    path.write_bytes(b"\n".join(synthetic_lines(RUNS, drop=drop, seed=11)) + b"\n")
    return path


@pytest.fixture(scope="module")
def drop_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("backtest") / "drop.jsonl", Drop(after=0.5))


@pytest.fixture(scope="module")
def score_drop_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("backtest") / "score-drop.jsonl", SCORE_DROP)


@pytest.fixture(scope="module")
def drop_json(drop_file: Path) -> subprocess.CompletedProcess[bytes]:
    """`backtest DROP_FILE --json`: two tests read the one run of it."""
    return run("backtest", str(drop_file), "--json")


@pytest.fixture(scope="module")
def real_text() -> subprocess.CompletedProcess[bytes]:
    """`backtest` of the bundled real runs, as text: two tests read the one run of it."""
    return run("backtest", str(REAL_RUNS))


def test_real_runs_page_nothing_and_say_why(real_text: subprocess.CompletedProcess[bytes]) -> None:
    proc = real_text
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    out = proc.stdout.decode()
    assert out.startswith("no pages\n")
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("test-00")}
    assert len(rows) == 21
    # a run joins its subtest's reference once it has left the window (10 runs later)
    assert re.search(r"test-001/T6 +3 runs  warming up \(0 of 50 reference runs\)", out)
    # three runs a subtest: none has the ten its reference needs before its runs are watched
    assert re.search(r"test-002/T3 +123 runs  no subtest has 10 reference runs yet", out)
    for name, row in rows.items():
        monitored = name.endswith(("/T0", "/T3"))  # 72 and 123 runs; the others 3 to 45
        assert ("no run watched" in row) == monitored, row
        assert ("warming up" in row) == (not monitored), row
    assert "\n0 pages in 0 of 21 tiers, 1080 runs (0 rejected, 0 ignored)\nnote: " in out


def test_a_drop_pages_once_at_the_run_that_raised_it(
    drop_file: Path, drop_json: subprocess.CompletedProcess[bytes]
) -> None:
    path = drop_file
    proc = drop_json
    assert proc.returncode == 0, proc.stderr
    report = BacktestReport.model_validate_json(proc.stdout)
    assert [(p.experiment_id, p.tier, p.detector) for p in report.pages] == [
        ("synthetic-01", "T5", "pass_rate")
    ]
    page = report.pages[0]
    assert page.line > RUNS // 2  # after the drop began
    event = json.loads(path.read_bytes().splitlines()[page.line - 1])
    assert event["run_id"] == page.run_id
    assert report.runs == RUNS
    assert report.design.warmup_runs == 50
    assert report.design.thresholds == {"pass_rate": 2e6, "score": 2e6}
    tiers = {(t.experiment_id, t.tier): t for t in report.tiers}
    assert len(tiers) == 21
    dropped = tiers[("synthetic-01", "T5")]
    assert (dropped.why, dropped.pages, dropped.dropped) == ("paged", 1, True)
    # five subtests in turn: each is watched from its 13th run, when ten of its runs have
    # joined its reference (a run joins once it has left the window, ten runs later)
    assert dropped.monitored_runs == 300 - 5 * 12
    assert all(t.why == "no_drop" for key, t in tiers.items() if key != ("synthetic-01", "T5"))
    plain = run("backtest", str(path)).stdout.decode()
    assert plain.startswith(
        f"page  line {page.line}  synthetic-01/T5  run {page.run_id}  pass rate\n"
    )
    assert "paged 1 time (first at line" in plain
    assert plain.endswith("1 page in 1 of 21 tiers, 6300 runs (0 rejected, 0 ignored)\n")


def test_a_score_only_drop_pages_by_score(score_drop_file: Path) -> None:
    doc = json.loads(run("backtest", str(score_drop_file), "--json").stdout)
    assert [(p["tier"], p["detector"]) for p in doc["pages"]] == [("T5", "score")]
    assert doc["pages"][0]["line"] > RUNS // 2


def test_stdin_and_a_settings_change(drop_file: Path) -> None:
    path = drop_file
    stdin = json.loads(run("backtest", "-", "--json", stdin=path.read_bytes()).stdout)
    assert [p["tier"] for p in stdin["pages"]] == ["T5"]
    quiet = run(
        "backtest", "-", stdin=path.read_bytes(), env={"EVALSTREAM_DROP_WARMUP_RUNS": "1000"}
    )
    assert quiet.returncode == 0, quiet.stderr
    out = quiet.stdout.decode()
    assert out.startswith("no pages\n")
    assert "synthetic-01/T5  300 runs  warming up (290 of 1000 reference runs)" in out
    assert "warm-up 1000 runs" in out


def _directory_events() -> list[dict[str, Any]]:
    """One experiment's runs with a drop, with run ids as ProjectScylla's directories make
    them (each run's completed_at distinct: window order is the order they were made)."""
    events = list(synthetic_events(7 * 60, experiments=1, drop=Drop(after=0.5), seed=4))
    for event in events:
        event["subtest"] = "00"  # one subtest: its reference calibrates within the history
        run_number = f"run_{event['run_number']:02d}"
        event["run_id"] = (
            f"{event['experiment_id']}/{event['tier']}/{event['subtest']}/{run_number}"
        )
    return events


def test_experiment_directories_page_at_window_order_positions(tmp_path: Path) -> None:
    events = _directory_events()
    for event in reversed(events):  # written in any order: window order is what counts
        write_event_as_run(tmp_path, event)
    env = {"EVALSTREAM_DROP_WARMUP_RUNS": "10", "EVALSTREAM_DROP_FALSE_PAGE_RUNS": "1000"}
    proc = run("backtest", str(tmp_path), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    report = BacktestReport.model_validate_json(proc.stdout)
    assert [(p.tier, p.detector) for p in report.pages] == [("T5", "pass_rate")]
    in_order = sorted(events, key=lambda e: (e["completed_at"], e["run_id"]))
    page = report.pages[0]
    assert in_order[page.line - 1]["run_id"] == page.run_id
    assert page.line > len(events) // 2
    lines = b"\n".join(json.dumps(e).encode() for e in in_order)
    as_file = BacktestReport.model_validate_json(
        run("backtest", "-", "--json", stdin=lines, env=env).stdout
    )
    assert as_file.pages == report.pages
    plain = run("backtest", str(tmp_path), env=env).stdout.decode()
    assert plain.startswith(f"page  run {page.line}  synthetic-01/T5  run {page.run_id}")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["/nonexistent.jsonl"], {}, b"stream-app backtest: error: cannot read /nonexistent.jsonl"),
        (["-"], {"EVALSTREAM_DROP_WARMUP_RUNS": "1"}, b"stream-app backtest: error:"),
        (["/", "/nonexistent.jsonl"], {}, b"/nonexistent.jsonl is not a directory"),
    ],
)
def test_user_errors_are_one_line(args: list[str], env: dict[str, str], message: bytes) -> None:
    proc = run("backtest", *args, stdin=b"", env=env)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert b"Traceback" not in proc.stderr
    assert proc.stderr.count(b"\n") == 1
    assert proc.stdout == b""


def test_untrusted_ids_are_escaped_for_the_terminal() -> None:
    event = json.loads(REAL_RUNS.read_bytes().splitlines()[0])
    event["experiment_id"] = "evil\x1b[31m"
    proc = run("backtest", "-", stdin=json.dumps(event).encode())
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b" not in proc.stdout
    assert b"evil\\x1b[31m/" in proc.stdout


def test_retire_starts_an_idle_experiment_afresh(tmp_path: Path) -> None:
    """`--retire`, as `replay --retire`: an experiment idle for experiment_idle_ttl_s of event
    time retires, and a run after that starts its tiers afresh, warm-up included, as the live
    worker would; without it the tiers go on."""
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 1, 5, tzinfo=UTC)
    first = list(synthetic_events(7 * 80, experiments=1, seed=5, start=start))
    later = list(synthetic_events(7 * 5, experiments=1, seed=6, start=start + timedelta(hours=2)))
    for event in later:
        event["run_id"] += "-later"
    path = tmp_path / "gap.jsonl"
    path.write_bytes(b"\n".join(json.dumps(e).encode() for e in first + later) + b"\n")
    ttl = {"EVALSTREAM_EXPERIMENT_IDLE_TTL_S": "3600"}
    on = BacktestReport.model_validate_json(
        run("backtest", "--json", "--retire", str(path), env=ttl).stdout
    )
    off = BacktestReport.model_validate_json(run("backtest", "--json", str(path), env=ttl).stdout)
    assert {t.runs for t in on.tiers} == {5}  # afresh after the gap
    assert not any(t.monitoring for t in on.tiers)
    assert {t.runs for t in off.tiers} == {85}
    assert all(t.monitoring for t in off.tiers)
    assert on.runs == off.runs == 7 * 85


def test_same_subtest_streaks_are_noted(
    real_text: subprocess.CompletedProcess[bytes], drop_json: subprocess.CompletedProcess[bytes]
) -> None:
    """The bundled real runs repeat each subtest three times in a row (ProjectScylla's order):
    backtest says that each subtest is watched once it has ten runs; the synthetic runs, a new
    subtest each run, get no note."""
    real = real_text
    assert real.returncode == 0, real.stderr
    assert (
        "note: in 18 tier(s) (e.g. test-001/T0) runs of the same subtest come back to back, 3.0"
        in (real.stdout.decode())
    )
    doc = BacktestReport.model_validate_json(run("backtest", "--json", str(REAL_RUNS)).stdout)
    assert len(doc.notes) == 1
    synthetic = BacktestReport.model_validate_json(drop_json.stdout)
    assert synthetic.notes == []
