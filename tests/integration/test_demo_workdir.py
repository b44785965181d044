"""`stream-app demo` removes its temporary directory (worker and broker logs, the worker's data)
on every way out: the end of `--duration`, Ctrl-C, an error; `--keep-workdir` keeps it and says
where it is. A demo killed outright leaves nothing running, and the next demo removes the
directory it left. TMPDIR points into the test's own directory, so what is left there is the
demo's."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stream_app.processes.orphans import OWNER_FILE, remove_orphaned_dirs
from tests.helpers import alive, children, from_a_terminal, kill_with_descendants
from tests.integration.harness import Mismatch, require_tansu, wait_until


class Demo:
    """A demo subprocess with its own TMPDIR and its output in a file."""

    def __init__(self, tmp_path: Path, *args: str, **env: str) -> None:
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir()
        self.out = tmp_path / "demo.out"
        with self.out.open("wb") as sink:
            self.process = subprocess.Popen(
                from_a_terminal([sys.executable, "-m", "stream_app", "demo", *args]),
                env={**os.environ, "TMPDIR": str(self.tmpdir), **env},
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_for(self, phrase: str, timeout: float = 90) -> None:
        wait_until(lambda: phrase in self.text(), timeout=timeout, what=repr(phrase))

    def left(self) -> list[str]:
        return sorted(p.name for p in self.tmpdir.iterdir())

    def kill(self) -> None:
        kill_with_descendants(self.process)


def dead_pid() -> int:
    """The PID of a process that has exited and been reaped."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_removed_after_duration(tmp_path: Path) -> None:
    """...and the directories of killed demos (their owner gone) go first; a kept one stays."""
    require_tansu()
    demo = Demo(tmp_path, "--duration", "2", "--rate", "200")
    killed, kept = demo.tmpdir / "evalstream-demo-killed", demo.tmpdir / "evalstream-demo-kept"
    for directory in (killed, kept):
        (directory / "worker-data").mkdir(parents=True)
    (killed / OWNER_FILE).write_text(f"{dead_pid()} 1\n")
    try:
        assert demo.process.wait(120) == 0, demo.text()
    finally:
        demo.kill()
    assert "final state:" in demo.text()
    assert "removed 1 directory left by killed demos" in demo.text()
    assert demo.left() == [kept.name], demo.text()


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_killed_demo_leaves_nothing_running(tmp_path: Path) -> None:
    """SIGKILL gives the demo no chance to stop what it started: its watchdog does, within a
    bound (the children's own clean-up, then SIGKILL), and the directory it could not remove is
    an orphan the next demo removes."""
    require_tansu()
    demo = Demo(tmp_path, "--duration", "600", "--rate", "200")
    started: set[int] = set()
    try:
        demo.wait_for("evalstream demo —")  # the worker is ready: the table is shown
        started = children(demo.process.pid)
        lines = [command_line(pid) for pid in started]
        assert any("tansu" in line for line in lines), lines
        assert any("stream_app worker" in line for line in lines), lines
        demo.process.kill()
        demo.process.wait(10)

        def ended() -> bool | Mismatch:
            running = [command_line(pid) or str(pid) for pid in started if alive(pid)]
            return not running or Mismatch(f"still running: {running}")

        wait_until(ended, timeout=60, what="the demo's processes to end")
    finally:
        demo.kill()
        for pid in started:  # without a watchdog they outlive the test
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    [workdir] = demo.tmpdir.iterdir()
    assert remove_orphaned_dirs(demo.tmpdir, "evalstream-demo-*") == [workdir]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_removed_after_a_signal_while_starting(tmp_path: Path, signum: int) -> None:
    require_tansu()
    demo = Demo(tmp_path)
    try:
        demo.wait_for("waiting for the worker to join the group")
        assert [p.name.startswith("evalstream-demo-") for p in demo.tmpdir.iterdir()] == [True]
        demo.process.send_signal(signum)
        assert demo.process.wait(60) == 0, demo.text()
    finally:
        demo.kill()
    assert demo.left() == [], demo.text()


def test_a_busy_web_port_is_said_with_the_port_used(tmp_path: Path) -> None:
    """The demo moves to a free port when its web port is taken, and says so: `observe`
    scrapes the configured port by default and would see nothing."""
    require_tansu()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        demo = Demo(tmp_path, "--duration", "1", "--rate", "200", EVALSTREAM_WEB_PORT=str(busy))
        try:
            assert demo.process.wait(120) == 0, demo.text()
        finally:
            demo.kill()
    said = re.search(rf"web port {busy} is in use .* on (127\.0\.0\.1:(\d+))", demo.text())
    assert said, demo.text()
    assert f"stream-app observe --target {said[1]}" in demo.text()
    assert int(said[2]) != busy
    assert f"metrics http://{said[1]}/metrics" in demo.text()


def test_the_duration_bounds_the_wait_for_an_unreachable_broker(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        nobody = probe.getsockname()[1]
    demo = Demo(tmp_path, "--duration", "3", "--broker", f"kafka://127.0.0.1:{nobody}")
    try:
        assert demo.process.wait(30) == 2, demo.text()
    finally:
        demo.kill()
    assert "not reached within --duration 3 s" in demo.text()
    assert "Traceback" not in demo.text()
    assert demo.left() == [], demo.text()


def test_removed_after_an_error(tmp_path: Path) -> None:
    """A demo that fails (here: the experiment directory to watch is missing) cleans up too."""
    require_tansu()
    demo = Demo(tmp_path, "--watch", str(tmp_path / "missing"))
    try:
        assert demo.process.wait(60) == 2, demo.text()
    finally:
        demo.kill()
    assert "stream-app demo: error:" in demo.text()
    assert "Traceback" not in demo.text()
    assert demo.left() == [], demo.text()


def test_kept_on_request(tmp_path: Path) -> None:
    require_tansu()
    demo = Demo(tmp_path, "--keep-workdir")
    try:
        demo.wait_for("waiting for the worker to join the group")
        demo.process.send_signal(signal.SIGINT)
        assert demo.process.wait(60) == 0, demo.text()
    finally:
        demo.kill()
    [kept] = demo.left()
    workdir = demo.tmpdir / kept
    assert kept.startswith("evalstream-demo-")
    assert (workdir / "worker.log").is_file()
    assert f"kept in {workdir}" in demo.text()
