"""The sender behind the inspect_ai hook, with no broker to reach: every run handed over ends in
the spool, once; runs handed over out of order go out in their own order when they come within
the hold, and nothing waits on the broker (stream_app/sources/run_sender.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from stream_app.ports import free_port
from stream_app.service.settings import load_settings
from stream_app.sources.run_sender import RunSender


def sender(spool: Path, capacity: int = 100, hold_s: float = 2.0) -> RunSender:
    settings = load_settings(broker_url=f"127.0.0.1:{free_port()}")  # nothing listens there
    return RunSender(settings, spool, capacity=capacity, hold_s=hold_s)


def run(n: int) -> bytes:
    return json.dumps({"run_id": f"r{n}"}).encode()


def spooled(spool: Path) -> list[str]:
    return [json.loads(line)["run_id"] for line in spool.read_bytes().splitlines()]


def test_runs_go_out_in_their_order_within_the_hold(tmp_path: Path) -> None:
    spool = tmp_path / "spool.jsonl"
    runs = sender(spool, hold_s=0.5)
    began = time.monotonic()
    runs.offer(run(3), b"e", (3,))
    time.sleep(0.2)  # run 3 would have gone by now, were it not held
    runs.offer(run(1), b"e", (1,))
    runs.offer(run(2), b"e", (2,))
    assert time.monotonic() - began < 0.3  # handing over never waits
    time.sleep(1.5)  # they ripen and go (to the spool: there is no broker)
    runs.offer(run(0), b"e", (0,))  # too late to go before them
    done = runs.close(timeout_s=10)
    assert spooled(spool) == ["r1", "r2", "r3", "r0"]
    assert (done.sent, done.spooled, done.spool) == (0, 4, spool)


def test_a_full_queue_spools_at_once_and_loses_nothing(tmp_path: Path) -> None:
    spool = tmp_path / "spool.jsonl"
    runs = sender(spool, capacity=2, hold_s=0.0)
    for n in range(500):
        runs.offer(run(n), None, (n,))
    done = runs.close(timeout_s=10)
    assert sorted(spooled(spool)) == sorted(f"r{n}" for n in range(500))
    assert done.spooled == 500


def test_close_with_nothing_offered_spools_nothing(tmp_path: Path) -> None:
    done = sender(tmp_path / "spool.jsonl").close()
    assert (done.sent, done.spooled) == (0, 0)
    assert not (tmp_path / "spool.jsonl").exists()


def test_a_spool_that_cannot_be_written_is_said_as_lost(tmp_path: Path) -> None:
    unwritable = tmp_path / "file"
    unwritable.write_text("")
    runs = sender(unwritable / "spool.jsonl", hold_s=0.0)  # a file where its directory goes
    runs.offer(run(1), None, (1,))
    done = runs.close(timeout_s=10)
    assert (done.sent, done.spooled, done.lost) == (0, 0, 1)
