"""Shared test helpers: event factories, paths, and starting and stopping commands under test."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from schemas.grade_change import GradeChange

DATA_DIR = Path(__file__).parent / "data"
SAMPLE_FILE = DATA_DIR / "scylla-sample.jsonl"

BASE_EVENT: dict[str, Any] = {
    "schema_version": 1,
    "run_id": "exp/T0/00/run_01",
    "experiment_id": "exp",
    "tier": "T0",
    "model": "claude-haiku-4-5",
    "subtest": "00",
    "run_number": 1,
    "passed": True,
    "judgment": {"summary": {"weighted_score": 0.85}},
    "tokens": {"input": 100, "output": 200, "cache_creation": 0, "cache_read": 0},
    "cost_usd": 0.5,
    "started_at": "2026-01-05T09:00:00Z",
    "completed_at": "2026-01-05T09:01:00Z",
}


def from_a_terminal(command: list[str]) -> list[str]:
    """`command` started with SIGHUP at its default, as from a terminal, for a test of its
    hangup handling: when the suite runs under `nohup`, a child inherits SIGHUP ignored, and then
    rightly keeps running on a hangup. (An exec'ing launcher, not `preexec_fn`, which is unsafe
    in a process with threads; the PID is the command's.)"""
    reset = "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_DFL); " + (
        "os.execvp(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", reset, *command]


def children(pid: int) -> set[int]:
    """Every descendant of `pid` now (Linux /proc)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            with contextlib.suppress(OSError):
                for child in (task / "children").read_text().split():
                    if int(child) not in found:
                        found.add(int(child))
                        todo.append(int(child))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def kill_with_descendants(process: subprocess.Popen[bytes]) -> None:
    """Teardown of a command that starts processes in sessions of their own (the demo's broker
    and worker): SIGKILL to it, its group and every descendant, found while it still runs (once
    it is gone they are reparented, and nothing stops them)."""
    if process.poll() is not None:
        return
    left = children(process.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait(10)


def make_event(**overrides: Any) -> dict[str, Any]:
    """A valid event with top-level fields replaced; `None` removes a field."""
    event = copy.deepcopy(BASE_EVENT)
    for key, value in overrides.items():
        if value is None:
            event.pop(key, None)
        else:
            event[key] = value
    return event


def encode(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode()


REPO = Path(__file__).resolve().parent.parent
PROMETHEUS_TOOLS = REPO / ".tools" / "prometheus" / "usr" / "bin"


def prometheus_tool(name: str) -> str:
    """Path of prometheus, promtool or amtool (scripts/install-prometheus.sh puts them in .tools/).
    Skips the test when missing, except in CI, where a missing binary is a failure."""
    import os
    import shutil

    import pytest

    candidate = PROMETHEUS_TOOLS / name
    if candidate.is_file():
        return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    message = f"{name} not found: run scripts/install-prometheus.sh"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def require_module(name: str, extra: str) -> None:
    """Skips the test when the optional package `name` (the extra `extra`) is missing, except in
    CI, where its absence is a failure."""
    import importlib.util
    import os

    import pytest

    if importlib.util.find_spec(name) is not None:
        return
    message = f"{name} is not installed: pip install -e '.[{extra}]'"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


CORPUS_DIR = Path(__file__).parent / "corpus"
CORPUS_MAX_BYTES = 65536


def corpus_stream() -> list[tuple[dict[str, Any], bytes]]:
    """The corpus in sending order: (manifest entry, bytes); the window-fill runs (entries with
    expected "accepted") go just before the `late` case."""
    manifest = json.loads((CORPUS_DIR / "manifest.json").read_text())
    fill = [line for line in (CORPUS_DIR / "window-fill.jsonl").read_bytes().splitlines() if line]
    stream: list[tuple[dict[str, Any], bytes]] = []
    for entry in manifest:
        if entry["name"] == "late":
            stream += [
                ({"name": f"window-fill-{i}", "expected": "accepted", "null_key": False}, raw)
                for i, raw in enumerate(fill)
            ]
        stream.append((entry, (CORPUS_DIR / entry["file"]).read_bytes()))
    return stream


A_GRADE_DROP = GradeChange(
    experiment_id="exp",
    tier="T5",
    previous_grade="B",
    grade="D",
    direction="drop",
    composite_median=0.6123,
    at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
    run_id="exp/T5/07/run_02",
)
"""A grade change as the worker publishes it, for the tests that print one."""


@dataclass
class KafkaRecord:
    """What aiokafka hands over, as far as `tail` and the live table read it."""

    topic: str
    value: bytes | None
    key: bytes | None = None
    partition: int = 0
    offset: int = 0
    timestamp: int = 1_767_603_660_000
