"""Functional correctness: in-process comparison, and untrusted source in the sandbox, where every
hostile or broken behaviour becomes a recorded error for its test case."""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stream_app.code_quality.functional_correctness import (
    FunctionalCorrectnessEvaluator,
    evaluate_source,
    outputs_match,
)
from stream_app.code_quality.sandbox import SandboxLimits, network_isolated, run_function
from tests.code_quality.test_sandbox import needs_sandbox

REFERENCE = "def solve(x):\n    return x * 2\n"
CASES = [{"input": {"x": 1}}, {"input": {"x": 2}}, {"input": {"x": 3}}]


def test_outputs_match() -> None:
    assert outputs_match(0.1 + 0.2, 0.3)
    assert not outputs_match(0.3001, 0.3)
    assert outputs_match(math.nan, math.nan)
    assert outputs_match(
        {"a": [1, (2.0, 3)], "b": {"c": 1e-13}}, {"a": [1, (2, 3)], "b": {"c": 0.0}}
    )
    assert not outputs_match([1, 2], (1, 2))  # a tuple is not a list
    assert not outputs_match(True, 1)
    assert not outputs_match({"a": 1}, {"a": 1, "b": 2})
    assert outputs_match(frozenset({1, 2}), {2, 1})


def test_in_process_evaluator_as_in_seed_004() -> None:
    def reference(xs: list[int]) -> dict[str, object]:
        return {"result": len(xs)}

    def generated(xs: list[int]) -> dict[str, object]:
        return {"result": len(xs) if len(xs) < 3 else -1}

    def crashing(xs: list[int]) -> int:
        raise RuntimeError("boom")

    evaluator = FunctionalCorrectnessEvaluator()
    cases = [{"input": {"xs": [1]}}, {"input": {"xs": [1, 2, 3]}}]
    m = evaluator.evaluate(generated, reference, cases)
    assert (m.tests_passed, m.tests_total, m.pass_rate) == (1, 2, 0.5)
    assert m.errors[0]["expected"] == "{'result': 3}"
    assert m.errors[0]["actual"] == "{'result': -1}"
    m = evaluator.evaluate(crashing, reference, cases)
    assert m.tests_passed == 0
    assert m.errors[0]["error"] == "RuntimeError: boom"
    assert evaluator.evaluate(reference, reference, []).pass_rate == 0.0


def test_pandas_dataframes_compare_by_value() -> None:
    import pandas as pd  # in the dev extra (optional for users): the suite has it

    evaluator = FunctionalCorrectnessEvaluator()
    frame = pd.DataFrame({"a": [1.0, 2.0]})
    assert evaluator._outputs_match({"result": frame}, {"result": frame + 1e-13})
    assert not evaluator._outputs_match(frame, frame + 1)


@pytest.fixture
def sandboxed() -> None:
    needs_sandbox()


@pytest.mark.usefixtures("sandboxed")
def test_correct_and_wrong_generated_source() -> None:
    right = evaluate_source("def solve(x):\n    return x + x\n", REFERENCE, "solve", CASES)
    assert (right.tests_passed, right.tests_total, right.pass_rate, right.errors) == (3, 3, 1.0, [])
    assert right.sandbox == "namespaces"
    wrong = evaluate_source(
        "def solve(x):\n    return 4 if x == 2 else 0\n", REFERENCE, "solve", CASES
    )
    assert wrong.tests_passed == 1
    assert {e["expected"] for e in wrong.errors} == {"2", "6"}


@pytest.mark.usefixtures("sandboxed")
@pytest.mark.parametrize(
    ("body", "kind", "error"),
    [
        ("    while True:\n        pass", "timeout", "timeout"),
        ("    import time\n    time.sleep(60)", "timeout", "timeout: no result within 2 s"),
        (
            "    import resource\n    resource.setrlimit(resource.RLIMIT_CPU, (1, 2))\n"
            "    while True:\n        pass",
            "timeout",
            "timeout: CPU limit: killed by SIGXCPU",
        ),
        ("    return len(bytearray(2 * 1024**3))", "memory", "MemoryError"),
        ("    import os\n    return os.fork()", "forbidden", "os.fork is not allowed"),
        (
            "    import os\n    return os.system('touch /tmp/evalstream-pwned')",
            "forbidden",
            "os.system is not allowed",
        ),
        (
            "    import subprocess\n    return subprocess.run(['true']).returncode",
            "forbidden",
            "subprocess.Popen is not allowed",
        ),
        (
            "    import socket\n    socket.create_connection(('127.0.0.1', 22), timeout=1)",
            "forbidden",
            "not allowed",
        ),
        ("    import os\n    os.abort()", "crashed", "crashed: killed by SIGABRT"),
        (
            "    import faulthandler\n    faulthandler._sigsegv()",
            "crashed",
            "crashed: killed by SIGSEGV",
        ),
        ("    import os\n    os._exit(0)", "crashed", "crashed: exit status 0"),
        ("    raise SystemExit(3)", "exception", "SystemExit: 3"),
        ("    return solve(x)", "exception", "RecursionError"),
        ("    return object()", "exception", "cannot leave the sandbox"),
        (
            "    open('big', 'wb').write(b'x' * (64 * 1024 * 1024))",
            "exception",
            "File too large",
        ),
        ("    import sys\n    sys.stderr.write('e' * 2**25)", "output_limit", "MiB on stdout"),
    ],
)
def test_hostile_or_broken_code_is_a_recorded_error(body: str, kind: str, error: str) -> None:
    source = f"def solve(x):\n{body}\n"
    # A second of CPU must come before the wall clock's limit: on a loaded machine (other suites
    # beside this one) a second of CPU can take more than two of the clock, so its case has more.
    timeout_s = 8.0 if "SIGXCPU" in error else 2.0
    started = time.monotonic()
    m = evaluate_source(source, REFERENCE, "solve", CASES[:1], timeout_s=timeout_s, memory_mb=256)
    assert time.monotonic() - started < 10
    assert m.tests_passed == 0
    assert m.tests_total == 1
    assert error in m.errors[0]["error"], m.errors
    assert m.errors[0]["kind"] == kind, m.errors
    assert not os.path.exists("/tmp/evalstream-pwned")


@pytest.mark.usefixtures("sandboxed")
def test_one_bad_case_does_not_spoil_the_others() -> None:
    source = "def solve(x):\n    while x == 2:\n        pass\n    return x * 2\n"
    m = evaluate_source(source, REFERENCE, "solve", CASES, timeout_s=1.0)
    assert m.tests_passed == 2
    assert "timeout" in m.errors[0]["error"]


def descendants(pid: int) -> set[int]:
    """Every living process below `pid`, from the parent links in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


@contextlib.contextmanager
def adopting_orphans() -> Iterator[None]:
    """Make this process the child subreaper of what it starts: an orphaned descendant is
    reparented here, not to init, so `descendants` still finds it (other test runs' sandboxes on
    the machine are not ours to count)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_child_subreaper = 36
    assert prctl(pr_set_child_subreaper, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    try:
        yield
    finally:
        prctl(pr_set_child_subreaper, 0, 0, 0, 0)


@pytest.mark.usefixtures("sandboxed")
def test_timed_out_code_leaves_no_process_behind() -> None:
    source = "def solve(x):\n    import os, time\n    while True:\n        time.sleep(0.01)\n"
    with adopting_orphans():
        before = descendants(os.getpid())
        m = evaluate_source(source, REFERENCE, "solve", CASES[:1], timeout_s=0.5)
        assert "timeout" in m.errors[0]["error"]
        time.sleep(0.2)
        left = descendants(os.getpid()) - before
        for pid in left:
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                assert b"def supervise(" not in cmdline  # the runner
                assert b"bwrap" not in cmdline


@pytest.mark.usefixtures("sandboxed")
def test_reference_failures_are_reported_as_such() -> None:
    m = evaluate_source(REFERENCE, "def solve(x):\n    return 1 / 0\n", "solve", CASES[:1])
    assert m.errors[0]["error"].startswith("reference failed: ZeroDivisionError")


@pytest.mark.usefixtures("sandboxed")
def test_values_cross_as_tagged_json() -> None:
    result = run_function(
        "def f():\n    return (1, [2.5, float('inf')], {3}, {(1, 2): b'x'}, None)\n", "f", {}
    )
    assert result.ok, result.error
    assert result.value == (1, [2.5, math.inf], frozenset({3}), {(1, 2): b"x"}, None)


@pytest.mark.usefixtures("sandboxed")
def test_print_output_does_not_corrupt_the_result() -> None:
    result = run_function(
        "def f():\n    print('__evalstream_sandbox_result__{\"ok\": true}')\n    return 7\n",
        "f",
        {},
    )
    assert result.value == 7
    assert result.stdout == '__evalstream_sandbox_result__{"ok": true}\n'  # kept, as output


@pytest.mark.usefixtures("sandboxed")
def test_ordinary_code_runs_as_before() -> None:
    """The standard library works in the sandbox: threads, a temporary file, sqlite, time zones,
    decimals; third-party packages are not there."""
    source = """
def f():
    import concurrent.futures, decimal, sqlite3, tempfile, zoneinfo, datetime
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        squares = sorted(pool.map(lambda n: n * n, range(8)))
    with tempfile.NamedTemporaryFile("w+") as tmp:
        tmp.write("kept")
        tmp.seek(0)
        text = tmp.read()
    db = sqlite3.connect(":memory:")
    total = db.execute("select sum(value) from (select 1 as value union all select 2)").fetchone()
    zone = datetime.datetime(2026, 1, 5, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")).utcoffset()
    return squares[-1], text, total[0], str(decimal.Decimal("0.1") * 3), zone.seconds
"""
    result = run_function(source, "f", {})
    assert result.value == (49, "kept", 3, "0.3", 3600), result
    missing = run_function("def f():\n    import pandas\n", "f", {})
    assert missing.error == "ModuleNotFoundError: No module named 'pandas'"


@pytest.mark.usefixtures("sandboxed")
def test_output_is_kept_up_to_64_kib() -> None:
    source = "def f():\n    print('o' * 100_000)\n    import sys\n    sys.stderr.write('é' * 5)\n"
    result = run_function(source, "f", {})
    assert result.ok, result.error
    assert result.stdout == "o" * 65536
    assert result.stderr == "é" * 5


def test_no_network_inside_the_sandbox() -> None:
    needs_sandbox()
    assert network_isolated()
    # Even past the audit hook (a raw socket module call), only loopback exists, and it is empty.
    probe = "def f():\n    import socket\n    return [name for _, name in socket.if_nameindex()]\n"
    result = run_function(probe, "f", {}, SandboxLimits(timeout_s=5))
    assert result.value == ["lo"]
