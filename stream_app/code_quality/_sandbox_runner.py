"""The trusted side of the sandbox (`sandbox.py`): standard library only, never imported by the
service, started as `python -I -S -B -c <this source> ROLE ...`.

`run FD`: the supervisor, PID 1 in the namespaces. The worker it forks closes FD before it runs
the code, so the verdict line on FD is the supervisor's alone. `stage SPEC` (as root, before
bubblewrap): the interpreter may be out of uid 65534's reach (pyenv under a 0700 /root), so it
bind-mounts what the sandbox needs onto a world-readable tmpfs, then drops to 65534 and executes
bubblewrap. The threat model: docs/code-quality.md, 'The sandbox: threat model'."""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import math
import os
import resource
import select
import signal
import sys
import time
from typing import Any, NoReturn

REFUSED = (
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.kill",
    "os.killpg",
    "subprocess.Popen",
    "pty.spawn",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.getaddrinfo",
    "ctypes.dlopen",
)
KEYCTL_SYSCALL = {"x86_64": 250, "aarch64": 219}
"""keyctl(2) by architecture; libc has no wrapper."""
KEYCTL_JOIN_SESSION_KEYRING = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def refuse(event: str, _args: tuple[Any, ...]) -> None:
    """Turns the obvious ways out into a recorded `forbidden` error; the namespaces, not this
    hook, are the boundary (`_posixsubprocess` and `ctypes` tricks get past it)."""
    if event.startswith(REFUSED):
        raise PermissionError(f"sandbox: {event} is not allowed")


def encode(value: Any, depth: int = 0) -> Any:
    """JSON with tags for what JSON cannot say (tuples, sets, bytes, non-finite floats)."""
    if depth > 100:
        raise ValueError("output nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, (list, tuple)):
        items = [encode(v, depth + 1) for v in value]
        return items if isinstance(value, list) else {"__tuple__": items}
    if isinstance(value, (set, frozenset)):
        return {"__set__": [encode(v, depth + 1) for v in value]}
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        return {
            "__dict__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]
        }
    kind = type(value).__name__
    if kind == "DataFrame" and hasattr(value, "to_dict"):
        return {"__dataframe__": encode(value.to_dict(orient="split"), depth + 1)}
    if kind == "Series" and hasattr(value, "to_dict"):
        return {"__series__": encode({"index": list(value.index), "data": list(value)}, depth + 1)}
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return encode(value.tolist(), depth + 1)
    raise TypeError(f"output of type {kind} cannot leave the sandbox")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(option, value, 0, 0, 0)


def _new_session_keyring() -> None:
    """Leaves the service's session keyring (systemd gives each service one; it may hold
    secrets the code would possess) for a new, empty one."""
    number = KEYCTL_SYSCALL.get(os.uname().machine)
    if number is not None:
        ctypes.CDLL(None, use_errno=True).syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None)


def _set_limits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        hard = value + 1 if name == "RLIMIT_CPU" else value  # SIGXCPU first, not SIGKILL
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(getattr(resource, name), (value, hard))


def worker(payload: dict[str, Any], result_fd: int) -> NoReturn:
    """The forked child that runs the generated code; ends with `os._exit`."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    _set_limits(payload["limits"])
    try:
        code = compile(payload["source"], "<generated>", "exec")
        sys.addaudithook(refuse)
        namespace: dict[str, Any] = {"__name__": "__sandbox__"}
        exec(code, namespace)
        value = namespace[payload["entry_point"]](**payload["kwargs"])
        result: dict[str, Any] = {"ok": True, "value": encode(value)}
    except MemoryError as exc:
        result = {"ok": False, "kind": "memory", "error": f"MemoryError: {exc}"[:2000]}
    except BaseException as exc:  # everything the code can do wrong is a result
        forbidden = isinstance(exc, PermissionError) and str(exc).startswith("sandbox:")
        kind = "forbidden" if forbidden else "exception"
        result = {"ok": False, "kind": kind, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    try:
        data = json.dumps(result).encode()
    except BaseException:
        data = b'{"ok": false, "kind": "memory", "error": "MemoryError: result too large"}'
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    with contextlib.suppress(BaseException):
        _write_all(result_fd, data)
    os._exit(0)


def _collect(pid: int, result_fd: int, timeout_s: float, limit: int) -> dict[str, Any]:
    """Reads the worker's result until it exits, the wall timeout passes or the result outgrows
    `limit`; the worker is dead and reaped on return."""
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    size = 0
    verdict: dict[str, Any] = {"timeout": False, "too_large": False}
    status: int | None = None
    open_fd: int | None = result_fd
    while status is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            verdict["timeout"] = True
            break
        if open_fd is not None:
            ready, _, _ = select.select([open_fd], [], [], min(remaining, 0.02))
            if ready:
                data = os.read(open_fd, 65536)
                if data:
                    size += len(data)
                    if size > limit:
                        verdict["too_large"] = True
                        break
                    chunks.append(data)
                else:
                    os.close(open_fd)
                    open_fd = None
        else:
            time.sleep(min(remaining, 0.02))
        done, status_now = os.waitpid(pid, os.WNOHANG)
        if done:
            status = status_now
    if status is None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        status = os.waitpid(pid, 0)[1]
    elif open_fd is not None:  # whatever the worker wrote before it exited
        os.set_blocking(open_fd, False)
        with contextlib.suppress(OSError):
            while size <= limit and (data := os.read(open_fd, 65536)):
                size += len(data)
                chunks.append(data)
        verdict["too_large"] = size > limit
    if os.WIFSIGNALED(status):
        verdict["signal"] = os.WTERMSIG(status)
    else:
        verdict["exit"] = os.WEXITSTATUS(status)
    if chunks and not verdict["too_large"]:
        verdict["result"] = b"".join(chunks).decode("utf-8", "replace")
    return verdict


def supervise(verdict_fd: int) -> None:
    """PID 1 of the sandbox: runs the worker and writes the verdict line on `verdict_fd`."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as PID 1, default signals from inside are void
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _new_session_keyring()
    payload = json.loads(sys.stdin.buffer.read())
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.close(verdict_fd)
        worker(payload, write_end)
    os.close(write_end)
    verdict = _collect(pid, read_end, payload["timeout_s"], payload["result_limit"])
    _write_all(verdict_fd, json.dumps(verdict).encode() + b"\n")


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def stage(spec: dict[str, Any]) -> NoReturn:
    """As root: the sandbox's sources onto a tmpfs at spec["stage"]/<i> (private mount namespace),
    then uid/gid spec["uid"] and bubblewrap (opened before the switch, executed by descriptor)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    root = spec["stage"].encode()
    options = b"mode=0755,size=1m"
    _check(libc.mount(b"tmpfs", root, b"tmpfs", MS_NOSUID | MS_NODEV, options), "mount tmpfs")
    for i, source in enumerate(spec["sources"]):
        target = os.path.join(spec["stage"], str(i))
        if os.path.isdir(source):
            os.mkdir(target)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        flags = MS_BIND | MS_REC
        _check(libc.mount(source.encode(), target.encode(), None, flags, None), f"bind {source}")
        flags |= MS_REMOUNT | MS_RDONLY
        _check(libc.mount(None, target.encode(), None, flags, None), f"read-only {source}")
    bwrap = os.open(spec["argv"][0], os.O_RDONLY | os.O_CLOEXEC)
    os.setgroups([])
    os.setgid(spec["uid"])
    os.setuid(spec["uid"])
    os.execve(bwrap, spec["argv"], spec["env"])


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        supervise(int(sys.argv[2]))
    elif sys.argv[1:2] == ["stage"]:
        try:
            stage(json.loads(sys.argv[2]))
        except OSError as exc:
            print(f"sandbox stage: {exc}", file=sys.stderr)
            sys.exit(1)
    else:
        sys.exit(f"usage: {sys.argv[0]} run FD | stage SPEC")


if __name__ == "__main__":
    main()
