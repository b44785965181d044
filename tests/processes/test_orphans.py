"""What a killed command leaves behind: its watchdog stops the process groups it was told of when
the command dies (the leader's own clean-up first, then whatever the leader left in its group),
and nothing when dismissed; a directory is orphaned once the process that claimed it is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stream_app.processes.orphans import (
    OWNER_FILE,
    Watchdog,
    claim,
    orphaned,
    remove_orphaned_dirs,
    running,
    start_time,
)

GRACE_S = 1.0
# A command that starts a watchdog and one child group, says the child's PID, and waits to be
# killed (or dismisses the watchdog and exits, with "done"). The child group: a leader that
# SIGTERM ends, and a grandchild that ignores SIGTERM (only SIGKILL to the group ends it).
COMMAND = f"""
import subprocess, sys, time
from stream_app.processes.orphans import Watchdog
watchdog = Watchdog(grace_s={GRACE_S}).start()
child = subprocess.Popen(
    ["sh", "-c", "(trap '' TERM; exec sleep 60) & echo $!; exec sleep 61"],
    stdout=subprocess.PIPE, start_new_session=True,
)
watchdog.watch(child)
print(child.pid, child.stdout.readline().decode().strip(), flush=True)
if sys.argv[1:] == ["done"]:
    watchdog.stop()
    sys.exit(0)
if sys.argv[1:] == ["unwatch"]:  # as if reaped: its group id is no longer its
    watchdog.unwatch(child)
    print("unwatched", flush=True)
time.sleep(600)
"""


@pytest.fixture
def started() -> Iterator[list[int]]:
    """The PIDs a test's command started, SIGKILLed at the end whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def run_command(*args: str) -> tuple[subprocess.Popen[bytes], list[int]]:
    command = subprocess.Popen([sys.executable, "-c", COMMAND, *args], stdout=subprocess.PIPE)
    assert command.stdout is not None
    return command, [int(pid) for pid in command.stdout.readline().split()]


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_killed_command_leaves_no_child_and_no_grandchild(started: list[int]) -> None:
    command, pids = run_command()
    started += pids
    assert len(pids) == 2
    assert all(running(pid) for pid in pids)
    command.kill()
    command.wait()
    leader, grandchild = pids
    assert wait_for(lambda: not running(leader), GRACE_S)  # SIGTERM: at once
    # it ignores SIGTERM: SIGKILL to its group, once the leader is gone
    assert wait_for(lambda: not running(grandchild), GRACE_S + 5)


def test_a_dismissed_watchdog_stops_nothing(started: list[int]) -> None:
    command, pids = run_command("done")
    started += pids
    assert command.wait(10) == 0
    time.sleep(GRACE_S + 0.5)  # what a watchdog wrongly stopping them would have taken
    assert all(running(pid) for pid in pids)


def test_an_unwatched_group_is_left_alone(started: list[int]) -> None:
    """A group the command reaped and unwatched may belong to someone else by the time the
    command dies: the watchdog must not signal it."""
    command, pids = run_command("unwatch")
    started += pids
    assert command.stdout is not None
    assert command.stdout.readline().strip() == b"unwatched"
    command.kill()
    command.wait()
    time.sleep(GRACE_S + 0.5)  # what a watchdog wrongly stopping them would have taken
    assert all(running(pid) for pid in pids)


def test_stop_is_safe_without_start_and_twice() -> None:
    watchdog = Watchdog()
    watchdog.stop()
    watchdog.start()
    watchdog.watch(None)
    watchdog.stop()
    watchdog.stop()


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def claimed(directory: Path, owner: str) -> Path:
    directory.mkdir()
    (directory / OWNER_FILE).write_text(owner + "\n")
    return directory


def test_a_directory_is_orphaned_once_its_owner_is_gone(tmp_path: Path) -> None:
    mine = tmp_path / "demo-mine"
    mine.mkdir()
    claim(mine)
    parent = os.getppid()
    dead = claimed(tmp_path / "demo-dead", f"{dead_pid()} 1")
    alive = claimed(tmp_path / "demo-alive", f"{parent} {start_time(parent)}")
    reused = claimed(tmp_path / "demo-reused", f"{parent} 1")  # the PID now runs another
    unclaimed = tmp_path / "demo-unclaimed"
    unclaimed.mkdir()
    garbled = claimed(tmp_path / "demo-garbled", "not a pid")
    assert [orphaned(d) for d in (mine, dead, alive, reused, unclaimed, garbled)] == [
        False,
        True,
        False,
        True,
        False,
        False,
    ]
    (tmp_path / "other-dead").mkdir()
    (tmp_path / "other-dead" / OWNER_FILE).write_text(f"{dead_pid()}\n")
    assert remove_orphaned_dirs(tmp_path, "demo-*") == [dead, reused]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "demo-alive",
        "demo-garbled",
        "demo-mine",
        "demo-unclaimed",
        "other-dead",
    ]
