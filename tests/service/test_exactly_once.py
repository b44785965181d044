"""Why evalstream does not offer Faust's `exactly_once` (docs/brokers.md): Faust's transaction
manager puts each sent record in the transaction of the partition it is written *to*, and commits
an input partition's offsets in the transaction of that partition. An output written to another
partition than its input's is then committed apart from the offset it depends on. This pins that
behaviour of Faust, so that a Faust that changes it brings the question back."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from faust.transport.consumer import TransactionManager
from faust.types import TP


def manager(sent: list[dict[str, Any]], committed: list[Any]) -> TransactionManager:
    """Faust's TransactionManager with the app, consumer and producer it asks, recording."""

    async def send(*args: Any, **kwargs: Any) -> None:
        sent.append(kwargs)

    async def commit_transactions(by_transactional_id: Any, group_id: str, **_: Any) -> None:
        committed.append(dict(by_transactional_id))

    tm = TransactionManager.__new__(TransactionManager)
    tm.app = SimpleNamespace(  # type: ignore[assignment]
        conf=SimpleNamespace(id="evalstream"),
        assignor=SimpleNamespace(group_for_topic=lambda topic: 0),
    )
    tm.consumer = SimpleNamespace(  # type: ignore[assignment]
        key_partition=lambda topic, key, partition: partition
    )
    tm.producer = SimpleNamespace(  # type: ignore[assignment]
        send=send, commit_transactions=commit_transactions
    )
    return tm


async def test_a_record_joins_the_transaction_of_the_partition_it_is_written_to() -> None:
    sent: list[dict[str, Any]] = []
    committed: list[Any] = []
    tm = manager(sent, committed)
    # A run read from partition 0 of the input whose output goes to partition 3.
    await tm.send("evalstream-runs-by-tier", b"exp-7", b"bundle", 3, None, None)
    await tm.commit({TP("run-completed", 0): 11})
    assert sent[0]["transactional_id"] == "evalstream-0-3"
    assert list(committed[0]) == ["evalstream-0-0"]  # the input's offset: another transaction
