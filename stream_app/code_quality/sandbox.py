"""Runs one function of untrusted generated code where the kernel, not the interpreter, holds it.

Each call runs `_sandbox_runner.py` in bubblewrap's namespaces as uid 65534; what the code sees,
its limits and what is not contained: docs/code-quality.md, 'The sandbox: threat model'. Why
bubblewrap rather than unshare(2) through ctypes: a user namespace, pivot_root, locked read-only
binds, /dev and dropped capabilities done right are what bubblewrap (Flatpak's sandbox) is for,
and our own would be more code in the one place where a mistake is an escape. It fails closed:
`SandboxUnavailable` unless the caller passes `allow_unsandboxed=True`."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import IO, Any, Final, Literal

from stream_app.tools_dir import tools_dir

RUNNER: Final = Path(__file__).with_name("_sandbox_runner.py")
NOBODY: Final = 65534
OUTPUT_CAP: Final = 64 * 1024
"""Bytes of stdout and of stderr kept; the rest is read and dropped."""
OUTPUT_CEILING: Final = 16 * 1024 * 1024
"""Bytes on stdout plus stderr after which the run is ended as `output_limit`."""
RESULT_LIMIT: Final = 8 * 1024 * 1024
"""Bytes of JSON a return value may take."""
START_ALLOWANCE_S: Final = 3.0
"""Added to the timeout for the parent's own deadline: start-up, and the supervisor's report."""
END_GRACE_S: Final = 2.0

SandboxMode = Literal["namespaces", "unsandboxed"]
ResultKind = Literal["ok", "exception", "timeout", "memory", "crashed", "output_limit", "forbidden"]


class SandboxUnavailable(RuntimeError):
    """The kernel or the machine cannot sandbox; untrusted code was not run."""


@dataclass(frozen=True)
class SandboxLimits:
    """Caps on one sandboxed run, so untrusted code cannot exhaust the machine."""

    timeout_s: float = 5.0
    """Wall-clock seconds for the whole run; the CPU limit is a second more (RLIMIT_CPU)."""
    memory_mb: int = 512
    """Address space (RLIMIT_AS)."""
    max_file_mb: int = 16
    """Largest file the code may write (RLIMIT_FSIZE)."""
    max_open_files: int = 64
    max_processes: int = 64
    """Processes of the sandbox's user (RLIMIT_NPROC): a fork bomb stops here."""
    tmpfs_mb: int = 64
    """The private /tmp, in memory (namespaces mode)."""


@dataclass(frozen=True)
class SandboxResult:
    """`kind` is "ok", "exception" (the code raised; `error` is "Type: message") or a failure of
    the run, whose `error` starts with the kind. stdout and stderr are cut at 64 KiB."""

    ok: bool
    value: Any = None
    error: str | None = None
    kind: ResultKind = "ok"
    mode: SandboxMode = "namespaces"
    stdout: str = ""
    stderr: str = ""


def _failure(kind: ResultKind, reason: str, base: SandboxResult) -> SandboxResult:
    return replace(base, ok=False, error=f"{kind}: {reason}", kind=kind)


@dataclass(frozen=True)
class SandboxStatus:
    """Whether this machine can sandbox, and why not: shown to users instead of a traceback."""

    available: bool
    reason: str
    bwrap: str | None = None


def find_bwrap() -> str | None:
    """The bwrap to use: on PATH, else the one scripts/install-sandbox.sh put under the
    `tools_dir` setting."""
    found = shutil.which("bwrap")
    if found:
        return found
    installed = tools_dir() / "bubblewrap" / "usr" / "bin" / "bwrap"
    return str(installed) if os.access(installed, os.X_OK) else None


def _python() -> str:
    """The base interpreter (never the virtualenv's launcher, whose site-packages stay out)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _inside(path: str, directories: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


@cache
def _view() -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """What the sandbox sees, read-only, at the same paths as here: (directories and files to
    bind, symlinks (target, link) to recreate, site-packages directories to hide). The shared
    libraries, the time zones, the interpreter and its standard library; nothing else."""
    base = {
        "base": sys.base_prefix,
        "platbase": sys.base_exec_prefix,
        "installed_base": sys.base_prefix,
        "installed_platbase": sys.base_exec_prefix,
    }
    paths = sysconfig.get_paths(scheme="posix_prefix", vars=base)
    wanted = ["/usr/lib", "/usr/lib64", "/usr/share/zoneinfo", _python()]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        wanted.append(str(sysconfig.get_config_var("LIBDIR")))
    wanted += [paths["stdlib"], paths["platstdlib"]]
    binds: list[str] = []
    for path in (os.path.realpath(p) for p in wanted):
        if os.path.exists(path) and not _inside(path, binds):
            binds = [b for b in binds if not _inside(b, [path])] + [path]
    links = []
    for top in ("/lib", "/lib64", "/lib32"):
        if os.path.islink(top):
            links.append((os.readlink(top), top))
        elif os.path.isdir(top) and not _inside(top, binds):
            binds.append(top)
    hidden = sorted(
        {
            os.path.realpath(paths[key])
            for key in ("purelib", "platlib")
            if os.path.isdir(paths[key]) and _inside(os.path.realpath(paths[key]), binds)
        }
    )
    return binds, links, hidden


def _bwrap_argv(
    bwrap: str, sources: list[str], limits: SandboxLimits, verdict_fd: int
) -> list[str]:
    """Bubblewrap's command line; `sources` are where to bind each of `_view()`'s paths from."""
    binds, links, hidden = _view()
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--uid",
        str(NOBODY),
        "--gid",
        str(NOBODY),
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--as-pid-1",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "HOME",
        "/tmp",
    ]
    for source, path in zip(sources, binds, strict=True):
        argv += ["--ro-bind", source, path]
    for target, link in links:
        argv += ["--symlink", target, link]
    for path in hidden:
        argv += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
    argv += ["--dev", "/dev", "--remount-ro", "/dev"]
    argv += ["--size", str(limits.tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    argv += ["--remount-ro", "/", "--chdir", "/tmp", "--"]
    return argv + _runner_argv(verdict_fd)


def _runner_argv(verdict_fd: int) -> list[str]:
    return [_python(), "-I", "-S", "-B", "-c", _runner_source(), "run", str(verdict_fd)]


@cache
def _runner_source() -> str:
    return RUNNER.read_text(encoding="utf-8")


def _worker_limits(limits: SandboxLimits) -> dict[str, int]:
    return {
        "RLIMIT_AS": limits.memory_mb * 1024 * 1024,
        "RLIMIT_CPU": math.ceil(limits.timeout_s) + 1,  # SIGXCPU; SIGKILL a second later
        "RLIMIT_FSIZE": limits.max_file_mb * 1024 * 1024,
        "RLIMIT_NOFILE": limits.max_open_files,
        "RLIMIT_NPROC": limits.max_processes,
        "RLIMIT_CORE": 0,
    }


@dataclass
class _Launch:
    argv: list[str]
    cwd: str
    stage: str | None = None


def _launch(mode: SandboxMode, bwrap: str | None, limits: SandboxLimits, fd: int) -> _Launch:
    """The command for one run. As root, bubblewrap runs as uid 65534; the runner's `stage` role
    binds the view onto a tmpfs it can reach first (the originals may sit under a 0700 home)."""
    if mode == "unsandboxed":
        return _Launch(_runner_argv(fd), cwd=tempfile.mkdtemp(prefix="evalstream-sandbox-"))
    assert bwrap is not None
    binds = _view()[0]
    if os.geteuid() != 0:
        return _Launch(_bwrap_argv(bwrap, binds, limits, fd), cwd="/")
    stage = tempfile.mkdtemp(prefix="evalstream-sandbox-", dir="/tmp")
    sources = [f"{stage}/{i}" for i in range(len(binds))]
    spec = {
        "stage": stage,
        "sources": binds,
        "uid": NOBODY,
        "argv": _bwrap_argv(bwrap, sources, limits, fd),
        "env": {"PATH": "/usr/bin:/bin"},
    }
    argv = [_python(), "-I", "-S", "-B", "-c", _runner_source(), "stage", json.dumps(spec)]
    return _Launch(argv, cwd="/", stage=stage)


@cache
def sandbox_status() -> SandboxStatus:
    """Whether this machine can run the sandbox: one real run of a probe that checks it is PID
    1's child as uid 65534 with only a loopback interface. Cached; `cache_clear()` re-probes."""
    bwrap = find_bwrap()
    if bwrap is None:
        return SandboxStatus(False, "bubblewrap (bwrap) not found: run scripts/install-sandbox.sh")
    probe = (
        "def probe():\n    import os, socket\n"
        "    return [os.getuid(), os.getppid(), [n for _, n in socket.if_nameindex()]]\n"
    )
    try:
        result = _run(
            probe, "probe", {}, SandboxLimits(timeout_s=10), mode="namespaces", bwrap=bwrap
        )
    except OSError as exc:
        return SandboxStatus(False, f"cannot start bubblewrap: {exc}", bwrap)
    if result.value == [NOBODY, 1, ["lo"]]:
        return SandboxStatus(True, "namespaces", bwrap)
    detail = result.stderr.strip().splitlines()[-1:] or [result.error or repr(result.value)]
    return SandboxStatus(False, f"the sandbox does not start here: {detail[0][:300]}", bwrap)


def network_isolated() -> bool:
    """Whether untrusted code runs without network (in the sandbox's network namespace)."""
    return sandbox_status().available


def require_sandbox(allow_unsandboxed: bool = False) -> SandboxMode:
    """The mode runs will use; raises `SandboxUnavailable` rather than run code unsandboxed
    unless the caller explicitly allows it."""
    status = sandbox_status()
    if status.available:
        return "namespaces"
    if allow_unsandboxed:
        return "unsandboxed"
    raise SandboxUnavailable(
        f"refusing to run untrusted code without a sandbox: {status.reason} "
        "(allow_unsandboxed=True runs it with resource limits only)"
    )


def run_function(
    source: str,
    entry_point: str,
    kwargs: dict[str, Any],
    limits: SandboxLimits | None = None,
    *,
    allow_unsandboxed: bool = False,
) -> SandboxResult:
    """Call `entry_point(**kwargs)` defined by `source` in the sandbox; kwargs must be JSON."""
    mode = require_sandbox(allow_unsandboxed)
    bwrap = sandbox_status().bwrap if mode == "namespaces" else None
    return _run(source, entry_point, kwargs, limits or SandboxLimits(), mode=mode, bwrap=bwrap)


def _run(
    source: str,
    entry_point: str,
    kwargs: dict[str, Any],
    limits: SandboxLimits,
    *,
    mode: SandboxMode,
    bwrap: str | None,
) -> SandboxResult:
    """One run in `mode`; failures to even start are results too."""
    base = SandboxResult(False, mode=mode)
    payload = {
        "source": source,
        "entry_point": entry_point,
        "kwargs": kwargs,
        "timeout_s": limits.timeout_s,
        "result_limit": RESULT_LIMIT,
        "limits": _worker_limits(limits),
    }
    data = json.dumps(payload).encode()  # the caller's inputs must be JSON: its error, raised
    with contextlib.ExitStack() as stack:
        stdin = stack.enter_context(tempfile.TemporaryFile())
        stdin.write(data)
        stdin.seek(0)
        verdict_r, verdict_w = os.pipe()
        stack.callback(os.close, verdict_r)
        try:
            launch = _launch(mode, bwrap, limits, verdict_w)
        except OSError as exc:
            os.close(verdict_w)
            return _failure("crashed", f"cannot prepare the sandbox: {exc}", base)
        if launch.stage:
            stack.callback(_remove_dir, launch.stage)
        if mode == "unsandboxed":
            stack.callback(shutil.rmtree, launch.cwd, ignore_errors=True)
        try:
            process = subprocess.Popen(
                launch.argv,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(verdict_w,),
                cwd=launch.cwd,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": launch.cwd},
                start_new_session=True,
            )
        except OSError as exc:
            return _failure("crashed", f"cannot start the sandbox: {exc}", base)
        finally:
            os.close(verdict_w)
        try:
            outcome = _Outcome()
            _collect(process, verdict_r, limits.timeout_s + START_ALLOWANCE_S, outcome)
        finally:
            _end(process, outcome)
    return _verdict(outcome, base, limits)


def _remove_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(path)


@dataclass
class _Outcome:
    verdict: bytes = b""
    stdout: bytes = b""
    stderr: bytes = b""
    output_bytes: int = 0
    deadline_passed: bool = False
    output_exceeded: bool = False
    returncode: int | None = None


def _collect(
    process: subprocess.Popen[bytes], verdict_fd: int, budget_s: float, outcome: _Outcome
) -> None:
    """Reads the verdict, stdout and stderr as they come (keeping 64 KiB of each) until the
    verdict line is complete, every pipe is closed, output passes the ceiling or time is up."""
    assert process.stdout is not None
    assert process.stderr is not None
    deadline = time.monotonic() + budget_s
    verdict_limit = 2 * RESULT_LIMIT + 65536
    with selectors.DefaultSelector() as selector:
        selector.register(verdict_fd, selectors.EVENT_READ, "verdict")
        selector.register(process.stdout, selectors.EVENT_READ, "stdout")
        selector.register(process.stderr, selectors.EVENT_READ, "stderr")
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome.deadline_passed = True
                return
            for key, _ in selector.select(remaining):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fileobj)
                elif key.data == "verdict":
                    outcome.verdict += data
                    if b"\n" in outcome.verdict or len(outcome.verdict) > verdict_limit:
                        return
                elif _keep(outcome, key.data, data):
                    outcome.output_exceeded = True
                    return


def _keep(outcome: _Outcome, name: str, data: bytes) -> bool:
    """Adds output to `outcome` within the cap; whether the run's output passed the ceiling."""
    kept: bytes = getattr(outcome, name)
    if len(kept) < OUTPUT_CAP:
        setattr(outcome, name, kept + data[: OUTPUT_CAP - len(kept)])
    outcome.output_bytes += len(data)
    return outcome.output_bytes > OUTPUT_CEILING


def _end(process: subprocess.Popen[bytes], outcome: _Outcome) -> None:
    """After the verdict the sandbox ends by itself (PID 1 exits, the kernel ends the rest,
    bubblewrap follows); otherwise, or if it lingers, its session is killed: bubblewrap, and
    with it (parent-death signal) PID 1 and so the whole namespace. Bounded waits only."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=END_GRACE_S if outcome.verdict.endswith(b"\n") else 0.05)
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=END_GRACE_S)
    outcome.returncode = process.returncode
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            _drain(stream, "stdout" if stream is process.stdout else "stderr", outcome)
            stream.close()


def _drain(stream: IO[bytes], name: str, outcome: _Outcome) -> None:
    """Keeps what is left in a pipe (within the cap) until it closes, every holder having
    ended, or a short wait passes."""
    deadline = time.monotonic() + END_GRACE_S / 4
    fd = stream.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0 and selector.select(remaining):
            try:
                data = os.read(fd, 65536)
            except OSError:
                return
            if not data:
                return
            _keep(outcome, name, data)


def _verdict(outcome: _Outcome, base: SandboxResult, limits: SandboxLimits) -> SandboxResult:
    """The result of a run from what the supervisor reported; never raises."""
    stdout = outcome.stdout.decode("utf-8", "replace")
    stderr = outcome.stderr.decode("utf-8", "replace")
    base = replace(base, stdout=stdout, stderr=stderr)
    if outcome.output_exceeded:
        reason = f"more than {OUTPUT_CEILING // (1024 * 1024)} MiB on stdout and stderr"
        return _failure("output_limit", reason, base)
    try:
        report = json.loads(outcome.verdict) if outcome.verdict.endswith(b"\n") else None
    except ValueError:
        report = None
    if not isinstance(report, dict):
        if outcome.deadline_passed:
            return _failure("timeout", f"no result within {limits.timeout_s:g} s", base)
        reason = f"sandbox ended (status {outcome.returncode}): {_last_line(stderr)}"
        return _failure("crashed", reason, base)
    return _report(report, limits, base)


def _last_line(text: str) -> str:
    return (text.strip().splitlines()[-1:] or ["no output"])[0][:500]


def _report(report: dict[str, Any], limits: SandboxLimits, base: SandboxResult) -> SandboxResult:
    """Reads the supervisor's verdict: timeout, size, the worker's result or how it died."""
    if report.get("timeout"):
        return _failure("timeout", f"no result within {limits.timeout_s:g} s", base)
    if report.get("too_large"):
        reason = f"result larger than {RESULT_LIMIT // (1024 * 1024)} MiB of JSON"
        return _failure("output_limit", reason, base)
    text = report.get("result")
    if isinstance(text, str):
        try:
            result = json.loads(text)
            if result["ok"] is True:
                return replace(base, ok=True, value=_decode(result["value"]), kind="ok")
            kind = result.get("kind", "exception")
            error = str(result["error"])[:2000]
        except Exception as exc:  # whatever the worker's pipe carried
            return _failure("crashed", f"malformed result ({type(exc).__name__})", base)
        if kind == "exception":
            return replace(base, ok=False, error=error, kind="exception")
        if kind in ("memory", "forbidden"):
            return _failure(kind, error, base)
        return _failure("crashed", "malformed result (unknown kind)", base)
    signum = report.get("signal")
    if isinstance(signum, int):
        name = _signal_name(signum)
        if name == "SIGXCPU":
            return _failure("timeout", f"CPU limit: killed by {name}", base)
        return _failure("crashed", f"killed by {name}", base)
    return _failure("crashed", f"exit status {report.get('exit')}: {_last_line(base.stderr)}", base)


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
            return base64.b64decode(inner, validate=True)
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


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
