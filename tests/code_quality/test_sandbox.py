"""Issue 10: generated code attacking its sandbox as a hostile program would. Each attack is written
here as generated source; the checks hold because the kernel contains the code, not the
interpreter. The `check_*` functions are plain functions so that
`test_attacks_fail_as_an_unprivileged_user` can re-run them all as uid 65534."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stream_app.code_quality import sandbox
from stream_app.code_quality.functional_correctness import evaluate_source
from stream_app.code_quality.sandbox import (
    SandboxLimits,
    SandboxUnavailable,
    run_function,
    sandbox_status,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
REFERENCE = "def solve(x):\n    return x * 2\n"
CASE = [{"input": {"x": 21}}]
NOBODY = 65534

# Starts a process the audit hook never hears of (`_posixsubprocess` raises no audit event), in a
# new session; `hold_pipes` keeps the sandbox's stdout and stderr open in it, `out` (a descriptor)
# gets its stdout. `unhooked` runs code that way, as the strongest attacker inside, and returns what
# it printed.
SPAWN = """
def spawn(code, hold_pipes=False, out=None):
    import _posixsubprocess, os, sys
    null = os.open("/dev/null", os.O_RDWR)
    out = null if out is None else out
    io = (-1, -1, -1, -1, -1, -1) if hold_pipes else (null, -1, -1, out, -1, out)
    r, w = os.pipe()
    args = (
        [sys.executable, "-S", "-c", code], [os.fsencode(sys.executable)], True, (), None, None,
        *io, r, w, False, True, -1, None, None, -1, -1, None,
    )
    try:
        return _posixsubprocess.fork_exec(*args, False)
    except TypeError:  # the signature differs between Python versions
        return _posixsubprocess.fork_exec(*args)

def unhooked(code):
    import os
    out = os.open("unhooked.out", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.waitpid(spawn(code, out=out), 0)
    os.lseek(out, 0, 0)
    return os.read(out, 1 << 20).decode()
"""


def needs_sandbox() -> None:
    """Skips a test that runs generated code where this machine cannot sandbox it (bwrap missing:
    run scripts/install-sandbox.sh; namespaces refused); in CI that is a failure."""
    status = sandbox_status()
    if status.available:
        return
    message = f"no sandbox on this machine: {status.reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def sandboxed() -> None:
    needs_sandbox()


def processes_with(tag: str) -> list[int]:
    """PIDs (in our namespace) whose command line contains `tag`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if tag.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def kill_tagged(tag: str) -> None:
    """Ends what a failed check left running (only the processes carrying this check's tag)."""
    for pid in processes_with(tag):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def check_escaped_process_is_gone() -> None:
    """A process started in a new session (where the old `killpg` never reached) must not outlive
    the call: not in the process table, and not alive to write its marker a second later."""
    tag = f"evalstream-escape-{uuid.uuid4().hex}"
    marker = Path(tempfile.gettempdir()) / tag
    code = (
        "import pathlib, time\ntime.sleep(1)\n"
        f"try:\n    pathlib.Path({str(marker)!r}).write_text('alive')\nexcept OSError:\n    pass\n"
        f"time.sleep(60)  # {tag}"
    )
    source = SPAWN + f"\ndef solve(x):\n    spawn({code!r})\n    return x * 2\n"
    try:
        evaluate_source(source, REFERENCE, "solve", CASE, timeout_s=5)
        left = processes_with(tag)
        time.sleep(1.5)
        assert left == [], f"escaped process still running: {left}"
        assert not marker.exists(), "escaped process wrote its marker after the call returned"
        assert processes_with(tag) == []
    finally:
        kill_tagged(tag)
        marker.unlink(missing_ok=True)


def check_pipe_holder_cannot_hang_the_caller() -> None:
    """A detached process keeping the sandbox's stdout open forever: the call still returns."""
    tag = f"evalstream-holder-{uuid.uuid4().hex}"
    code = f"import time\ntime.sleep(3600)  # {tag}"
    source = SPAWN + f"\ndef solve(x):\n    spawn({code!r}, hold_pipes=True)\n    return x * 2\n"
    done = threading.Event()

    def call() -> None:
        evaluate_source(source, REFERENCE, "solve", CASE, timeout_s=2)
        done.set()

    started = time.monotonic()
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    try:
        thread.join(timeout=15)
        assert done.is_set(), "evaluate_source hung on a process holding its pipes"
        assert time.monotonic() - started < 8
        assert processes_with(tag) == []
    finally:
        kill_tagged(tag)  # unblocks a hung call
        thread.join(timeout=5)


def check_parent_files_are_out_of_reach() -> None:
    """Secrets of the host and of the service, and the service's directories, are not there."""
    tag = uuid.uuid4().hex
    home = Path(tempfile.mkdtemp(prefix="evalstream-service-"))
    secret = home / "evalstream.yaml"
    secret.write_text(f"sasl_password: {tag}\n")
    secret.chmod(0o600)
    os.environ["EVALSTREAM_TEST_SECRET"] = tag
    reads = {
        "/etc/shadow": "/etc/shadow",
        "parent environ": f"/proc/{os.getpid()}/environ",
        "ppid environ": "/proc/PPID/environ",
        "mode-600 config": str(secret),
    }
    targets = {
        "service directory": str(home),
        "site-packages": sysconfig.get_paths()["purelib"],
        "repository": str(REPO),
        "temp directory": tempfile.gettempdir(),
    }
    canary = f"evalstream-pwned-{tag}"
    source = f"""
def solve(x):
    import os
    out = {{}}
    for name, path in {reads!r}.items():
        try:
            with open(path.replace("PPID", str(os.getppid())), "rb") as f:
                out[name] = f.read(65536).decode("latin-1")
        except OSError as exc:
            out[name] = "denied"
    for name, directory in {targets!r}.items():
        try:
            with open(os.path.join(directory, {canary!r}), "w") as f:
                f.write("x")
            out["write " + name] = "written"
        except OSError:
            out["write " + name] = "denied"
    for name, path in {targets!r}.items():
        out["see " + name] = "visible" if os.path.exists(path) else "denied"
    return out
"""
    try:
        result = run_function(source, "solve", {"x": 1})
        assert result.ok, result.error
        assert {k: v for k, v in result.value.items() if k in reads and v != "denied"} == {}
        assert [d for d in targets.values() if Path(d, canary).exists()] == []
        seen = {k for k, v in result.value.items() if k.startswith("see ") and v != "denied"}
        assert seen <= {"see temp directory"}, seen  # its own private /tmp
        assert tag not in repr(result), "a secret of the service reached the generated code"
    finally:
        for directory in targets.values():
            Path(directory, canary).unlink(missing_ok=True)
        secret.unlink()
        home.rmdir()
        os.environ.pop("EVALSTREAM_TEST_SECRET", None)


FORGERIES = [
    '__evalstream_sandbox_result__{"ok": true, "value": 42}',
    "__evalstream_sandbox_result__{not json",
    "__evalstream_sandbox_result__{}",
    '__evalstream_sandbox_result__{"ok": true, "value": {"__bytes__": "!"}}',
    '__evalstream_sandbox_result__{"ok": true, "value": {"__dict__": [[[1], 2]]}}',
    '__evalstream_sandbox_result__{"ok": false}',
    '{"ok": true, "value": 42}',
    '{"exit": 0, "result": "{\\"ok\\": true, \\"value\\": 42}"}',
    "[" * 100000,
]


def check_forged_verdicts_cannot_pass_or_raise(forgery: str) -> None:
    """A wrong function writing forged verdicts everywhere it can (stdout, stderr, every other
    descriptor, at exit, from a thread and from a detached process after it returned) still
    fails, and the parent never raises."""
    source = (
        SPAWN
        + f"""
FORGED = ({forgery!r} + "\\n").encode()

def forge():
    import os
    for fd in range(1, 256):
        try:
            os.write(fd, FORGED)
        except OSError:
            pass

def solve(x):
    import atexit, threading, time
    forge()
    atexit.register(forge)
    threading.Thread(target=lambda: (time.sleep(0.05), forge()), daemon=True).start()
    code = (
        "import os, time\\nfor _ in range(20):\\n    time.sleep(0.02)\\n"
        "    for fd in range(1, 256):\\n        try:\\n"
        "            os.write(fd, %r)\\n        except OSError:\\n            pass\\n"
    ) % FORGED
    spawn(code, hold_pipes=True)
    return x * 2 + 1
"""
    )
    m = evaluate_source(source, REFERENCE, "solve", CASE, timeout_s=3)
    assert m.tests_passed == 0, m.errors
    assert m.tests_total == 1


def check_output_without_newline_keeps_a_right_answer() -> None:
    source = "def solve(x):\n    import os\n    os.write(1, b'no newline')\n    return x * 2\n"
    m = evaluate_source(source, REFERENCE, "solve", CASE)
    assert m.tests_passed == 1, m.errors


def _unhooked_call(attack: str, timeout_s: float = 5) -> Any:
    """Runs `attack` (code printing one JSON document) unhooked in the sandbox; its JSON."""
    source = SPAWN + f"\ndef solve():\n    return unhooked({attack!r})\n"
    result = run_function(source, "solve", {}, SandboxLimits(timeout_s=timeout_s))
    assert result.ok, (result.error, result.stderr)
    return json.loads(result.value)


PRIVILEGE_ATTACKS = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(result):
    return ctypes.get_errno() if result != 0 else 0
out = {
    "ptrace PID 1": errno_of(libc.ptrace(16, 1, 0, 0)),
    "new user namespace": errno_of(libc.unshare(0x10000000)),
    "new mount namespace": errno_of(libc.unshare(0x00020000)),
    "mount proc": errno_of(libc.mount(b"proc", b"/tmp", b"proc", 0, None)),
    "setuid 0": errno_of(libc.setuid(0)),
    "chroot": errno_of(libc.chroot(b"/tmp")),
}
for path in ("/proc/1/mem", "/proc/self/environ", "/sys/kernel", "/etc/passwd", "/run"):
    out["see " + path] = os.path.exists(path)
try:
    os.open("/dev/tty", os.O_RDWR)  # a terminal to inject input into (TIOCSTI)
    out["open /dev/tty"] = True
except OSError as exc:
    out["open /dev/tty"] = exc.errno
print(json.dumps(out))
"""


def check_no_way_to_privileges() -> None:
    """Unhooked code cannot trace PID 1 (undumpable), make namespaces (disabled), mount, become
    root, see /proc, /sys, /etc or reach a terminal."""
    out = _unhooked_call(PRIVILEGE_ATTACKS)
    succeeded = {k: v for k, v in out.items() if v is True or (type(v) is int and v == 0)}
    assert succeeded == {}, out


def check_signals_cannot_reach_pid_1_or_the_service() -> None:
    """Signals to PID 1 (the supervisor) from inside are void; kill(-1) ends only the sandbox's
    own processes, not a process of the same uid outside."""
    root = os.geteuid() == 0
    outside = subprocess.Popen(
        ["sleep", "30"], user=NOBODY if root else None, group=NOBODY if root else None
    )
    try:
        attack = (
            "import json, os, signal\nout = {}\n"
            "for sig in ('SIGSTOP', 'SIGTERM', 'SIGINT', 'SIGKILL', 'SIGUSR1'):\n"
            "    try:\n        os.kill(1, getattr(signal, sig))\n        out[sig] = 'sent'\n"
            "    except OSError as exc:\n        out[sig] = exc.errno\n"
            f"try:\n    os.kill({outside.pid}, signal.SIGKILL)\n    out['outside'] = 'sent'\n"
            "except OSError as exc:\n    out['outside'] = exc.errno\n"
            "print(json.dumps(out))\n"
        )
        out = _unhooked_call(attack)  # a verdict arrives: PID 1 was neither stopped nor killed
        assert out["outside"] == 3, out  # ESRCH: that PID does not exist in the sandbox
        everyone = "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('{}')\n"
        source = SPAWN + f"\ndef solve():\n    return unhooked({everyone!r})\n"
        result = run_function(source, "solve", {})
        assert result.error == "crashed: killed by SIGKILL", result  # the worker, reported by PID 1
        assert outside.poll() is None, "kill(-1) inside reached a process outside"
    finally:
        outside.kill()
        outside.wait()


def check_filesystem_is_read_only_and_bounded() -> None:
    """Only the private /tmp is writable, and only up to its size."""
    source = """
def solve():
    import os, sys
    out = {}
    for d in ("/", "/dev", "/dev/shm", "/usr/lib", os.path.dirname(os.__file__), sys.prefix):
        try:
            with open(os.path.join(d, "w"), "wb") as f:
                f.write(b"x")
            out[d] = "written"
        except OSError as exc:
            out[d] = exc.errno
    written, chunk = 0, b"x" * (1 << 20)
    try:
        for i in range(200):
            with open(f"/tmp/fill{i}", "wb") as f:
                for _ in range(8):
                    f.write(chunk)
                    written += len(chunk)
    except OSError as exc:
        out["fill"] = exc.errno
    out["written"] = written
    return out
"""
    result = run_function(source, "solve", {})
    assert result.ok, result.error
    out = dict(result.value)
    assert out.pop("fill") == 28, result.value  # ENOSPC
    assert out.pop("written") <= 64 << 20
    assert "written" not in out.values(), out


def check_only_its_own_descriptors_are_open() -> None:
    """The generated code holds stdin (/dev/null), stdout, stderr and its result pipe: nothing of
    the service, and not the verdict pipe."""
    source = """
def solve():
    import os, stat
    found = {}
    for fd in range(4096):
        try:
            found[fd] = stat.S_IFMT(os.fstat(fd).st_mode)
        except OSError:
            pass
    return found
"""
    result = run_function(source, "solve", {})
    assert result.ok, result.error
    fifo, char = 0o010000, 0o020000
    assert sorted(result.value.values()) == [fifo, fifo, fifo, char], result.value
    assert result.value[0] == char


def check_no_network_even_unhooked() -> None:
    """A TCP listener on the host's loopback and an abstract Unix socket are out of reach."""
    import socket

    tcp = socket.create_server(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    name = f"\0evalstream-{uuid.uuid4().hex}"
    unix.bind(name)
    unix.listen()
    try:
        port = tcp.getsockname()[1]
        attack = (
            "import json, socket\nout = {}\n"
            f"for key, family, address in (('tcp', socket.AF_INET, ('127.0.0.1', {port})),"
            f" ('unix', socket.AF_UNIX, {name!r})):\n"
            "    s = socket.socket(family)\n    s.settimeout(2)\n"
            "    try:\n        s.connect(address)\n        out[key] = 'connected'\n"
            "    except OSError as exc:\n        out[key] = exc.errno\n"
            "print(json.dumps(out))\n"
        )
        out = _unhooked_call(attack)
        assert "connected" not in out.values(), out
    finally:
        tcp.close()
        unix.close()


def check_fork_bomb_is_contained() -> None:
    """Unhooked processes forking without end: the call times out and none of them is left."""
    tag = f"evalstream-bomb-{uuid.uuid4().hex}"
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n"
        f"    except OSError:\n        pass  # {tag}"
    )
    source = SPAWN + f"\ndef solve():\n    spawn({bomb!r})\n    while True:\n        pass\n"
    try:
        started = time.monotonic()
        result = run_function(source, "solve", {}, SandboxLimits(timeout_s=1))
        assert result.kind == "timeout", result
        assert time.monotonic() - started < 8
        assert processes_with(tag) == []
    finally:
        kill_tagged(tag)


def check_large_inputs_and_results() -> None:
    """Source and inputs travel on stdin, not argv (a 1 MB input would not fit an argument); a
    result over 8 MiB of JSON is `output_limit`."""
    padding = "# " + "x" * 300_000 + "\n"
    result = run_function(padding + "def f(s):\n    return len(s)\n", "f", {"s": "y" * 1_000_000})
    assert result.value == 1_000_000, result
    result = run_function("def f():\n    return 'x' * (9 << 20)\n", "f", {})
    assert result.kind == "output_limit", result


# add_key and keyctl by architecture (libc has no wrapper for them).
KEY_SYSCALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}

KEYRING_ATTACK = (
    "import ctypes, json\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "key = libc.syscall(KEYCTL, 10, -3, b'user', b'evalstream-secret', 0)\n"
    "buf = ctypes.create_string_buffer(4096)\n"
    "n = libc.syscall(KEYCTL, 11, key, buf, 4096) if key > 0 else -1\n"
    "print(json.dumps(buf.raw[:n].decode('latin-1') if n > 0 else ctypes.get_errno()))\n"
)

# The service: a session keyring of its own holding a secret, then the attack in the sandbox.
KEYRING_PROBE = """
import ctypes, json, platform, sys
from stream_app.code_quality.sandbox import run_function
add_key, keyctl = KEY_SYSCALLS[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(keyctl, 1, b"evalstream-service") > 0  # join a new session keyring
secret = sys.argv[1].encode()
assert libc.syscall(add_key, b"user", b"evalstream-secret", secret, len(secret), -3) > 0
attack = KEYRING_ATTACK.replace("KEYCTL", str(keyctl))
source = SPAWN + "\\ndef solve():\\n    return unhooked(%r)\\n" % attack
print(json.dumps(run_function(source, "solve", {}).value))
"""


def check_service_keyring_is_out_of_reach() -> None:
    """A secret in the service's session keyring (systemd gives each service one) stays there."""
    import platform

    if platform.machine() not in KEY_SYSCALLS:
        return  # no syscall numbers for this architecture: nothing to check
    secret = f"evalstream-key-{uuid.uuid4().hex}"
    constants = f"KEY_SYSCALLS = {KEY_SYSCALLS!r}\nKEYRING_ATTACK = {KEYRING_ATTACK!r}\n"
    constants += f"SPAWN = {SPAWN!r}\n"
    proc = subprocess.run(
        [sys.executable, "-c", constants + KEYRING_PROBE, secret],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert secret not in proc.stdout, proc.stdout


RSS_PROBE = """
import json, resource
from stream_app.code_quality.functional_correctness import evaluate_source
REFERENCE = "def solve(x):\\n    return x * 2\\n"
evaluate_source(REFERENCE, REFERENCE, "solve", [{"input": {"x": 1}}])  # warm up
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
printer = "def solve(x):\\n    import os\\n    while True:\\n        os.write(1, b'x' * 65536)\\n"
m = evaluate_source(printer, REFERENCE, "solve", [{"input": {"x": 1}}], timeout_s=2)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grew_kib": after - before, "errors": m.errors}))
"""


def check_endless_output_leaves_parent_memory_alone() -> None:
    """A child printing without end: the parent's peak RSS grows by less than 8 MiB."""
    proc = subprocess.run(
        [sys.executable, "-c", RSS_PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["grew_kib"] < 8 * 1024, report
    assert report["errors"], report


CHECKS: dict[str, Any] = {
    "escape": check_escaped_process_is_gone,
    "pipe holder": check_pipe_holder_cannot_hang_the_caller,
    "parent files": check_parent_files_are_out_of_reach,
    "no newline": check_output_without_newline_keeps_a_right_answer,
    "endless output": check_endless_output_leaves_parent_memory_alone,
    "privileges": check_no_way_to_privileges,
    "signals": check_signals_cannot_reach_pid_1_or_the_service,
    "filesystem": check_filesystem_is_read_only_and_bounded,
    "descriptors": check_only_its_own_descriptors_are_open,
    "network": check_no_network_even_unhooked,
    "fork bomb": check_fork_bomb_is_contained,
    "large inputs": check_large_inputs_and_results,
    "keyring": check_service_keyring_is_out_of_reach,
    **{
        f"forgery {i}": (lambda f=f: check_forged_verdicts_cannot_pass_or_raise(f))
        for i, f in enumerate(FORGERIES)
    },
}


def main() -> None:
    """Runs every check; prints one JSON line: name -> null or the failure."""
    report: dict[str, str | None] = {}
    for name, check in CHECKS.items():
        try:
            check()
            report[name] = None
        except BaseException:
            report[name] = traceback.format_exc()[-3000:]
    print(json.dumps({"uid": os.getuid(), "report": report}))


@pytest.mark.usefixtures("sandboxed")
def test_escaped_process_is_gone() -> None:
    check_escaped_process_is_gone()


@pytest.mark.usefixtures("sandboxed")
def test_pipe_holder_cannot_hang_the_caller() -> None:
    check_pipe_holder_cannot_hang_the_caller()


@pytest.mark.usefixtures("sandboxed")
def test_parent_files_are_out_of_reach() -> None:
    check_parent_files_are_out_of_reach()


@pytest.mark.usefixtures("sandboxed")
@pytest.mark.parametrize("forgery", FORGERIES)
def test_forged_verdicts_cannot_pass_or_raise(forgery: str) -> None:
    check_forged_verdicts_cannot_pass_or_raise(forgery)


@pytest.mark.usefixtures("sandboxed")
def test_output_without_newline_keeps_a_right_answer() -> None:
    check_output_without_newline_keeps_a_right_answer()


@pytest.mark.usefixtures("sandboxed")
def test_endless_output_leaves_parent_memory_alone() -> None:
    check_endless_output_leaves_parent_memory_alone()


@pytest.mark.usefixtures("sandboxed")
@pytest.mark.parametrize(
    "check",
    [
        check_no_way_to_privileges,
        check_signals_cannot_reach_pid_1_or_the_service,
        check_filesystem_is_read_only_and_bounded,
        check_only_its_own_descriptors_are_open,
        check_no_network_even_unhooked,
        check_fork_bomb_is_contained,
        check_large_inputs_and_results,
        check_service_keyring_is_out_of_reach,
    ],
    ids=lambda check: check.__name__.removeprefix("check_"),
)
def test_hostile_program(check: Any) -> None:
    check()


@pytest.fixture
def no_sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Forces the path of a machine that cannot sandbox (no bubblewrap found)."""
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    sandbox_status.cache_clear()
    yield
    sandbox_status.cache_clear()


@pytest.mark.usefixtures("no_sandbox")
def test_fails_closed_without_a_sandbox(tmp_path: Path) -> None:
    """Nothing runs, with one clear error, and the probe says why."""
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').close()\ndef solve(x):\n    return x * 2\n"
    expected = "refusing to run untrusted code without a sandbox: bubblewrap"
    with pytest.raises(SandboxUnavailable, match=expected):
        evaluate_source(source, REFERENCE, "solve", CASE)
    with pytest.raises(SandboxUnavailable, match=expected):
        run_function(source, "solve", {"x": 1})
    assert not marker.exists()
    assert not sandbox.network_isolated()


@pytest.mark.usefixtures("no_sandbox")
def test_unsandboxed_only_when_asked_and_labelled() -> None:
    m = evaluate_source(
        "def solve(x):\n    return x + x\n", REFERENCE, "solve", CASE, allow_unsandboxed=True
    )
    assert (m.tests_passed, m.sandbox) == (1, "unsandboxed")
    loop = "def f():\n    print('spinning')\n    while True:\n        pass\n"
    result = run_function(loop, "f", {}, SandboxLimits(timeout_s=0.5), allow_unsandboxed=True)
    assert (result.kind, result.mode) == ("timeout", "unsandboxed")
    forked = run_function(
        "def f():\n    import os\n    os.fork()\n", "f", {}, allow_unsandboxed=True
    )
    assert (forked.kind, forked.mode) == ("forbidden", "unsandboxed"), forked


@pytest.mark.usefixtures("sandboxed")
def test_results_say_they_ran_in_namespaces() -> None:
    m = evaluate_source(REFERENCE, REFERENCE, "solve", CASE)
    assert (m.tests_passed, m.sandbox) == (1, "namespaces")
    assert run_function(REFERENCE, "solve", {"x": 1}).mode == "namespaces"


# Runs argv[1:] in a new user namespace (all uids mapped, so root stays root) whose limit on
# further user namespaces is 0: a kernel refusing the sandbox, as a container's seccomp would.
DENY_USER_NAMESPACES = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000 | 0x00020000) != 0:
        os._exit(100)
    os.write(ready_w, b"1")
    os.read(go_r, 1)
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0")
    os.execv(sys.argv[1], sys.argv[1:])
os.read(ready_r, 1)
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{name}", "w") as f:
        f.write("0 0 4294967295")
os.write(go_w, b"1")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""

REFUSED_PROBE = """
import json
from stream_app.code_quality.functional_correctness import evaluate_source
from stream_app.code_quality.sandbox import SandboxUnavailable
args = ("def solve(x):\\n    return x * 2\\n",) * 2 + ("solve", [{"input": {"x": 1}}])
try:
    evaluate_source(*args)
    refused = None
except SandboxUnavailable as exc:
    refused = str(exc)
unsandboxed = evaluate_source(*args, allow_unsandboxed=True)
print(json.dumps({"refused": refused, "unsandboxed": unsandboxed.sandbox}))
"""


@pytest.mark.usefixtures("sandboxed")
@pytest.mark.skipif(os.geteuid() != 0, reason="mapping every uid into a namespace needs root")
def test_fails_closed_where_the_kernel_refuses_namespaces() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", DENY_USER_NAMESPACES, sys.executable, "-c", REFUSED_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["refused"] is not None, "ran untrusted code although the kernel refused"
    assert "bwrap: Creating new namespace failed" in report["refused"], report
    assert report["unsandboxed"] == "unsandboxed"


def _blocked_ancestors(paths: list[Path]) -> dict[Path, list[Path]]:
    """For each directory that others cannot traverse, the needed paths below it. A needed
    directory that is itself closed (a checkout made with `mktemp -d` is mode 700) counts as
    its own blocked ancestor, with its subdirectories as what is needed below it."""
    blocked: dict[Path, dict[Path, None]] = {}
    for path in paths:
        for ancestor in [*reversed(path.parents), path]:
            if not os.stat(ancestor).st_mode & 0o001:
                below = (
                    [path] if ancestor != path else sorted(p for p in path.iterdir() if p.is_dir())
                )
                blocked.setdefault(ancestor, {}).update(dict.fromkeys(below))
                break
    return {ancestor: list(below) for ancestor, below in blocked.items()}


def as_nobody(argv: list[str], stage: Path) -> list[str]:
    """`argv` run as uid 65534. Where this Python or the repository sits below a directory that
    only root can enter (pyenv under /root), a private mount namespace puts them on view:
    each needed tree is moved (through `stage`, an empty directory) onto an open tmpfs laid over
    that directory."""
    needed = [Path(sys.base_prefix), Path(sys.prefix), REPO]
    script = ["set -e", f'stage="{stage}"', 'mount -t tmpfs -o mode=700 tmpfs "$stage"']
    for i, (ancestor, paths) in enumerate(_blocked_ancestors(needed).items()):
        for j, path in enumerate(paths):
            script += [f'mkdir "$stage/{i}-{j}"', f'mount --rbind "{path}" "$stage/{i}-{j}"']
        script.append(f'mount -t tmpfs -o mode=755 tmpfs "{ancestor}"')
        for j, path in enumerate(paths):
            script += [f'mkdir -p "{path}"', f'mount --move "$stage/{i}-{j}" "{path}"']
    script.append(
        f'exec setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups --inh-caps=-all -- "$@"'
    )
    shell = ["sh", "-c", "\n".join(script), "sh", *argv]
    return ["unshare", "--mount", "--propagation", "private", "--", *shell]


@pytest.mark.skipif(os.geteuid() != 0, reason="already unprivileged: the tests above are that run")
@pytest.mark.usefixtures("sandboxed")
def test_attacks_fail_as_an_unprivileged_user() -> None:
    """The same attacks with the service running as an unprivileged user (uid 65534)."""
    stage = Path(tempfile.mkdtemp(prefix="evalstream-stage-"))
    try:
        proc = subprocess.run(
            as_nobody([sys.executable, "-c", "import test_sandbox; test_sandbox.main()"], stage),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd="/",
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "PYTHONPATH": str(HERE),
            },
        )
    finally:
        stage.rmdir()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["uid"] == NOBODY
    failures = {name: why for name, why in result["report"].items() if why}
    assert failures == {}, "\n".join(f"{name}:\n{why}" for name, why in failures.items())
