"""The test brokers clean up after a start that goes wrong: a failure or Ctrl-C half-way stops
the process and removes the storage directory (a `with` block does not exit what its
`__enter__` did not return); a test run stopped by SIGTERM stops its broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stream_app.brokers import BrokerError
from stream_app.brokers.kafka import ApacheKafka
from stream_app.brokers.tansu import EmbeddedBroker
from stream_app.processes import stop_process
from tests.helpers import REPO
from tests.integration.harness import require_broker, require_tansu, wait_until


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_kafka_whose_storage_cannot_be_formatted_leaves_nothing() -> None:
    require_broker("kafka")
    broker = ApacheKafka(config={"node.id": "not-a-number"})
    cause = r"storage tool failed: .*ConfigException: Invalid value not-a-number"
    with pytest.raises(BrokerError, match=cause):
        broker.start()
    assert broker.workdir is None
    assert broker.process is None


@pytest.mark.parametrize("kind", ["kafka", "tansu"])
def test_ctrl_c_while_a_broker_starts_stops_it(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind == "kafka":
        require_broker("kafka")
        broker: ApacheKafka | EmbeddedBroker = ApacheKafka(log_file=tmp_path / "broker.log")
    else:
        require_tansu()
        broker = EmbeddedBroker(log_file=tmp_path / "broker.log")
    started: list[int] = []

    def interrupted(*_: object) -> bool:
        """The wait for the broker to answer, where a user's Ctrl-C lands."""
        if broker.process is None:
            return False
        started.append(broker.process.pid)
        raise KeyboardInterrupt

    if isinstance(broker, ApacheKafka):
        monkeypatch.setattr(broker, "_answers", interrupted)
    else:
        monkeypatch.setattr("stream_app.brokers.tansu.port_open", interrupted)
    with pytest.raises(KeyboardInterrupt):
        broker.start()
    monkeypatch.undo()
    assert started, "the broker process never started"
    assert gone(started[0])
    assert broker.process is None
    if isinstance(broker, ApacheKafka):
        assert broker.workdir is None


def test_a_test_run_stopped_by_sigterm_stops_its_broker(tmp_path: Path) -> None:
    """A CI's timeout or a `kill` sends pytest SIGTERM: the session's broker, in a session of
    its own, must not outlive the run."""
    require_broker("kafka")
    test = tmp_path / "test_waits.py"
    test.write_text(
        "import time\n"
        "def test_waits(shared_kafka):\n"
        "    assert shared_kafka.process is not None\n"
        "    print('broker pid', shared_kafka.process.pid, flush=True)\n"
        "    time.sleep(120)\n"
    )
    plugins = ["-p", "tests.sigterm", "-p", "tests.integration.conftest"]
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider", *plugins, str(test)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert run.stdout is not None
        pid = None
        deadline = time.monotonic() + 60
        while pid is None and time.monotonic() < deadline:
            line = run.stdout.readline().decode()
            if not line:
                break
            if line.startswith("broker pid "):
                pid = int(line.split()[2])
        assert pid is not None, "the broker never started"
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
        wait_until(lambda: gone(pid), 10, interval=0.1, what="the broker to stop with the run")
    finally:
        stop_process(run)
