"""The test brokers clean up after a start that goes wrong: a failure or Ctrl-C half-way stops
the process and removes the storage directory (a `with` block does not exit what its
`__enter__` did not return)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stream_app.brokers import BrokerError
from stream_app.brokers.kafka import ApacheKafka
from stream_app.brokers.tansu import EmbeddedBroker
from tests.integration.harness import require_broker, require_tansu


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
