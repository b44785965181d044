"""`stream-app demo` removes its temporary directory (worker and broker logs, the worker's data)
on every way out: the end of `--duration`, Ctrl-C, an error; `--keep-workdir` keeps it and says
where it is. TMPDIR points into the test's own directory, so what is left there is the demo's."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import from_a_terminal, kill_with_descendants
from tests.integration.harness import require_tansu, wait_until


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


def test_removed_after_duration(tmp_path: Path) -> None:
    require_tansu()
    demo = Demo(tmp_path, "--duration", "2", "--rate", "200")
    try:
        assert demo.process.wait(120) == 0, demo.text()
    finally:
        demo.kill()
    assert "final state:" in demo.text()
    assert demo.left() == [], demo.text()


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
