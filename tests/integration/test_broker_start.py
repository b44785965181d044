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


def test_only_a_broker_that_exits_on_its_own_leaves_the_class_archive(tmp_path: Path) -> None:
    """The JVM writes the class archive as the server exits: what one killed meanwhile left is
    dropped (a cut-short archive would be refused by every later start, and none would write it
    again), one that exited on its own is kept, and Kafka's tools, which load few classes, never
    write one."""
    require_broker("kafka")
    home = tmp_path / "kafka"  # a home of its own, with no archive yet
    home.mkdir()
    shared = ApacheKafka().home
    (home / "lib").symlink_to(shared / "lib")
    (home / "log4j2.properties").symlink_to(shared / "log4j2.properties")
    broker = ApacheKafka(home, log_file=tmp_path / "broker.log")
    assert not any("ArchiveClassesAtExit" in a for a in broker._java("kafka.tools.StorageTool"))
    assert any("ArchiveClassesAtExit" in a for a in broker._java("kafka.Kafka", server=True))
    cut_short = home / f"classes.jsa.{os.getpid()}"  # where this process's servers write it
    cut_short.write_bytes(b"half an archive")
    broker._keep_archive(complete=False)  # what `stop` says of a server it had to SIGKILL
    assert sorted(p.name for p in home.iterdir()) == ["lib", "log4j2.properties"]
    with broker:
        pass
    assert broker.class_archive.stat().st_size > 1_000_000
    assert sorted(p.name for p in home.iterdir()) == ["classes.jsa", "lib", "log4j2.properties"]
