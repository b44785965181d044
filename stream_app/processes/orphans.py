"""What a command killed outright (SIGKILL, the OOM killer) would leave behind, and who ends it.

Its children: a `Watchdog`, a small process in a session of its own, reads a pipe whose write end
only the command holds; when the command dies the pipe ends, and the watchdog stops the groups of
the children it was told of (SIGTERM, then SIGKILL): grandchildren too, with no guard of their own
and no Linux-only call (a pipe and `killpg`: POSIX). Its temporary directory: claimed with the
owner's PID (and start time, on Linux) and removed by a later run once that process is gone
(`remove_orphaned_dirs`); nothing else could remove it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Final, Self

from stream_app.processes import Stoppable

GRACE_S: Final = 10.0
"""How long the watchdog waits for the children's own clean-up after SIGTERM, before SIGKILL."""
OWNER_FILE: Final = ".owner"
"""The file of a claimed directory that names its owner: `<pid> <start time>`."""


class Watchdog(Stoppable):
    """Stops the process groups it is told of if this process dies without `stop`.

    `watch` a child right after it starts (in a session of its own: its PID is its group); `stop`
    once every child is stopped: the watchdog then exits and stops nothing. Not PR_SET_PDEATHSIG:
    Linux only, set in each child's start, and each of their children would need its own."""

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self.process: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None

    def start(self) -> Self:
        """Start the watchdog process (it needs no time to be ready: the pipe keeps what is
        written to it); the write end is not inherited by any other child (`os.pipe`)."""
        read, write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(self.grace_s)],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # neither Ctrl-C nor a closed terminal reaches it
            )
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        self._pipe = write
        return self

    def _say(self, line: str) -> None:
        if self._pipe is not None:
            with contextlib.suppress(OSError):  # the watchdog is gone: nothing to tell
                os.write(self._pipe, f"{line}\n".encode())

    def watch(self, process: subprocess.Popen[bytes] | None) -> None:
        """Stop `process`'s group (`start_new_session=True`) if this process dies; None (not
        started): nothing to watch."""
        if process is not None:
            self._say(f"watch {process.pid}")

    def unwatch(self, process: subprocess.Popen[bytes]) -> None:
        """Forget `process`'s group once it has been reaped: its id may go to another group."""
        self._say(f"unwatch {process.pid}")

    def stop(self, timeout: float = 5.0) -> None:
        """Dismiss the watchdog (everything it watched is stopped) and wait for it to exit."""
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            with contextlib.suppress(OSError):
                os.write(pipe, b"done\n")
            os.close(pipe)
        process, self.process = self.process, None
        if process is not None:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def watch_groups(lines: Iterable[bytes], grace_s: float) -> None:
    """The watchdog's work: read `watch PID`, `unwatch PID` and `done` lines until the pipe
    ends; ended without `done` (the command died), stop the groups still watched."""
    groups: set[int] = set()
    for line in lines:
        verb, _, pid = line.decode(errors="replace").strip().partition(" ")
        if verb == "done":
            return
        if verb == "watch" and pid.isdigit():
            groups.add(int(pid))
        elif verb == "unwatch" and pid.isdigit():  # reaped: its group id may be reused
            groups.discard(int(pid))
    end_groups(groups, grace_s)


def end_groups(groups: set[int], grace_s: float) -> None:
    """SIGTERM to each group (its processes' own clean-up runs), a wait of up to `grace_s`
    while any process of them is left, then SIGKILL to each group: whatever is left goes."""
    for pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_group_left(pgid) for pgid in groups) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pgid in groups:
        _signal_group(pgid, signal.SIGKILL)


def _group_left(pgid: int) -> bool:
    """Whether any process of group `pgid` is left (its leader, or what it started there)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def running(pid: int) -> bool:
    """Whether `pid` runs: on Linux a zombie does not (an orphan's is reaped by init, or by
    nobody in some containers); elsewhere a zombie counts until it is reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _proc_stat(pid)
    return stat is None or stat[0] != "Z"


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (state first), None without."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> str:
    """When `pid` started, in clock ticks since boot (Linux), so that a reused PID is told
    apart; "" where /proc does not say."""
    stat = _proc_stat(pid)
    return stat[19] if stat is not None and len(stat) > 19 else ""


def claim(directory: Path) -> None:
    """Name this process the owner of `directory`, so that a later run can tell it orphaned."""
    pid = os.getpid()
    (directory / OWNER_FILE).write_text(f"{pid} {start_time(pid)}\n")


def orphaned(directory: Path) -> bool:
    """Whether `directory` was claimed by a process that no longer runs (it never ended its
    run: it was killed). Unclaimed directories and ones of other users are never orphaned."""
    try:
        if directory.lstat().st_uid != os.getuid():
            return False
        pid_text, _, started = (directory / OWNER_FILE).read_text().strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    if pid == os.getpid():
        return False
    if not running(pid):
        return True
    return bool(started) and start_time(pid) not in ("", started)  # the PID was reused


def remove_orphaned_dirs(parent: Path, pattern: str) -> list[Path]:
    """Remove the directories of `parent` matching `pattern` that are `orphaned`; the removed."""
    removed = []
    for directory in sorted(parent.glob(pattern)):
        if directory.is_dir() and not directory.is_symlink() and orphaned(directory):
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def main(argv: list[str]) -> None:
    """`python -m stream_app.processes.orphans GRACE_S`, its pipe on stdin: the watchdog."""
    stdin: IO[bytes] = sys.stdin.buffer
    watch_groups(stdin, float(argv[0]) if argv else GRACE_S)


if __name__ == "__main__":
    main(sys.argv[1:])
