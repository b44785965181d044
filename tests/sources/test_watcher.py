"""The watcher's own failure paths, driven with a stand-in producer: a broker outage is waited
out and nothing is recorded before the broker acknowledged it; file events that cannot start
fall back to rescans."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError

from stream_app.service.settings import load_settings
from stream_app.sources.scylla.watch_state import WatchState
from stream_app.sources.watcher import Watcher, WatchOptions
from tests.scylla_dirs import Run, make_experiment, write_run


class Producer:
    """Acknowledges each send, except that the first `failures` sends raise."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.sent: list[tuple[str, bytes, bytes]] = []

    async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future[None]:
        if self.failures:
            self.failures -= 1
            raise KafkaConnectionError("broker gone")
        self.sent.append((topic, key, value))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def watcher(tmp_path: Path, **options: Any) -> tuple[Watcher, io.StringIO]:
    experiment = make_experiment(tmp_path / "results", "exp-a")
    for number in (1, 2):
        write_run(experiment, Run(number=number))
    progress = io.StringIO()
    settings = load_settings(broker_url="kafka://127.0.0.1:9")
    w = Watcher(
        settings,
        WatchOptions(
            roots=(tmp_path / "results",), state_path=tmp_path / "state", settle_s=0.0, **options
        ),
        progress=progress,
    )
    w.state = WatchState(tmp_path / "state")
    return w, progress


async def test_an_outage_is_waited_out_and_recorded_only_when_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, progress = watcher(tmp_path)
    delays: list[float] = []

    async def no_sleep(seconds: float) -> None:
        delays.append(seconds)
        assert w.state is not None
        assert w.state.run_ids == set()  # nothing recorded while unacknowledged

    monkeypatch.setattr("stream_app.sources.watcher.asyncio.sleep", no_sleep)
    producer = Producer(failures=3)
    w.scanner.scan()
    await w._publish(producer)
    assert delays == [1.0, 2.0, 4.0]
    assert progress.getvalue().count("publishing failed (KafkaConnectionError)") == 3
    assert [key for _t, key, _v in producer.sent] == [b"exp-a", b"exp-a"]
    assert WatchState(tmp_path / "state").run_ids == {"exp-a/T0/00/run_01", "exp-a/T0/00/run_02"}
    # Published: a rescan hands out nothing.
    w.scanner.scan()
    await w._publish(producer)
    assert len(producer.sent) == 2


async def test_file_events_that_cannot_start_fall_back_to_rescans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import watchfiles

    def broken(*_args: object, **_kwargs: object) -> Any:
        raise OSError(28, "inotify watch limit reached")

    monkeypatch.setattr(watchfiles, "awatch", broken)
    w, progress = watcher(tmp_path, fallback_poll_s=0.7)
    await w._file_events(asyncio.Event())
    assert w._poll_s == 0.7
    assert w._next_full == 0.0  # the next loop rescans at once
    assert "file events unavailable" in progress.getvalue()
    assert "rescanning every 0.7 s" in progress.getvalue()


def test_ctrl_c_while_the_broker_is_unreachable_stops_it_promptly(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    experiment = make_experiment(tmp_path / "results", "exp-a")
    write_run(experiment, Run())
    process = subprocess.Popen(
        [sys.executable, "-m", "stream_app", "watch", str(tmp_path / "results")],
        env={
            **os.environ,
            "EVALSTREAM_BROKER_URL": "kafka://127.0.0.1:1",
            "XDG_STATE_HOME": str(tmp_path),
        },
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        time.sleep(3)
        process.send_signal(signal.SIGINT)
        started = time.monotonic()
        _out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert time.monotonic() - started < 8
    assert process.returncode == 0, err
    text = err.decode()
    assert "watch: broker 127.0.0.1:1 unreachable (KafkaConnectionError); retrying in 1 s" in text
    assert "Traceback" not in text
    assert text.count("\n") < 10, text
