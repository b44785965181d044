"""Runs one function of untrusted generated code in a fresh, isolated, limited process.

Each call starts `python -I` (no environment, no user site) in its own process group and
temporary working directory, with, before it starts:
- a new network namespace, so it has no network (the `unshare -n` syscall; skipped where the
  platform refuses it, see `network_isolated()`);
- when we run as root and `nobody` can read the interpreter, the `nobody` user (so the process
  limit applies and little is writable); Linux never applies the process limit to root;
- limits on address space (`memory_mb`), CPU seconds, file size, open files, processes, core dumps.
Inside, an audit hook refuses spawning processes, signals and sockets. A wall timeout kills the
whole process group, and so does the end of every call. Inputs and outputs cross as JSON (never
pickle). Whatever the code does (loops, memory bombs, forks, crashes, network calls), the call
returns a `SandboxResult`; it never hangs and never raises for the code's sake.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import ctypes.util
import json
import math
import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

RUNNER: Final = Path(__file__).with_name("_sandbox_runner.py")
MARKER: Final = "__evalstream_sandbox_result__"
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWNET: Final = 0x40000000
NOBODY: Final = 65534


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 5.0
    memory_mb: int = 512
    max_file_mb: int = 16
    max_open_files: int = 64
    max_processes: int = 64


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    value: Any = None
    error: str | None = None


def _unshare(flags: int) -> bool:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return bool(libc.unshare(flags) == 0)


def _world_accessible(path: Path) -> bool:
    """Whether any user can reach (and read or run) `path`: what `nobody` needs."""
    target = path.resolve()
    for directory in target.parents:
        if not directory.stat().st_mode & stat.S_IXOTH:
            return False
    return bool(target.stat().st_mode & (stat.S_IROTH | stat.S_IXOTH))


@cache
def drops_to_nobody() -> bool:
    """Root drops to `nobody` when `nobody` can run the interpreter, its stdlib and the runner."""
    if os.geteuid() != 0:
        return False
    try:
        return all(_world_accessible(p) for p in (Path(sys.executable), Path(os.__file__), RUNNER))
    except OSError:
        return False


def _isolate(limits: SandboxLimits, workdir: str, drop: bool) -> None:
    """Runs in the child between fork and exec."""
    if os.geteuid() == 0:
        _unshare(CLONE_NEWNET)
        if drop:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
    else:
        _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    memory = limits.memory_mb * 1024 * 1024
    cpu = math.ceil(limits.timeout_s) + 1
    files = limits.max_file_mb * 1024 * 1024
    for limit, value in (
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_FSIZE, files),
        (resource.RLIMIT_NOFILE, limits.max_open_files),
        (resource.RLIMIT_NPROC, limits.max_processes),
        (resource.RLIMIT_CORE, 0),
    ):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(limit, (value, value))
    os.chdir(workdir)


@cache
def network_isolated() -> bool:
    """Whether this machine lets the sandbox run without network (a new network namespace)."""
    probe = "import socket; print(len(socket.if_nameindex()))"
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", probe],
            preexec_fn=lambda: _isolate(SandboxLimits(), "/", drops_to_nobody()),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and proc.stdout.strip() == "1"  # only the loopback interface


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict) and len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == "__tuple__":
            return tuple(_decode(v) for v in inner)
        if tag == "__set__":
            return frozenset(_decode(v) for v in inner)
        if tag == "__bytes__":
            return base64.b64decode(inner)
        if tag == "__float__":
            return float(inner)
        if tag == "__dict__":
            return {_freeze(_decode(k)): _decode(v) for k, v in inner}
        if tag in ("__dataframe__", "__series__"):
            return {tag: _decode(inner)}
    if isinstance(value, dict):  # the runner tags every dict; keep untagged ones as they are
        return {k: _decode(v) for k, v in value.items()}
    return value


def _freeze(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def run_function(
    source: str, entry_point: str, kwargs: dict[str, Any], limits: SandboxLimits | None = None
) -> SandboxResult:
    """Call `entry_point(**kwargs)` defined by `source` in a sandbox; kwargs must be JSON."""
    limits = limits or SandboxLimits()
    drop = drops_to_nobody()
    payload = json.dumps({"source": source, "entry_point": entry_point, "kwargs": kwargs}).encode()
    with tempfile.TemporaryDirectory(prefix="evalstream-sandbox-") as workdir:
        if drop:
            os.chown(workdir, NOBODY, NOBODY)
        process = subprocess.Popen(
            [sys.executable, "-I", str(RUNNER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir},
            start_new_session=True,
            # preexec_fn runs between fork and exec; the caller's threads are not touched there.
            preexec_fn=lambda: _isolate(limits, workdir, drop),  # noqa: PLW1509
        )
        try:
            stdout, stderr = process.communicate(payload, timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            process.communicate()
            return SandboxResult(False, error=f"timeout: no result within {limits.timeout_s:g} s")
        finally:
            _kill_group(process)  # forked leftovers die with the call
    for line in reversed(stdout.decode("utf-8", "replace").splitlines()):
        if line.startswith(MARKER):
            result = json.loads(line[len(MARKER) :])
            if result["ok"]:
                return SandboxResult(True, value=_decode(result["value"]))
            return SandboxResult(False, error=result["error"])
    if process.returncode < 0:
        reason = _signal_name(process.returncode)
        if reason == "SIGXCPU":
            return SandboxResult(False, error=f"CPU limit: killed by {reason}")
        return SandboxResult(False, error=f"crashed: killed by {reason}")
    tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
    return SandboxResult(False, error=f"crashed: exit status {process.returncode}: {tail[0][:500]}")


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
