"""`stream-app worker` with faults injected at its edges, for the failure-path tests.

The worker, the broker and the processes are real; only these seams are patched, from the
environment, before the worker starts:
- `FAULT_FAIL_SEND_TOPIC`, `FAULT_FAIL_SEND_AFTER=N`: the N-th record the producer is asked to
  send to that topic fails with a `KafkaError` (once): at once when `FAULT_FAIL_SEND_HOW=raise`
  (a send the client refuses), or later, in its acknowledgement, when `...=ack` (a record the
  broker refuses, or one that expired in the producer's buffer).
- `FAULT_KILL_AT_WRITE=N`, `FAULT_KILL_WHEN=before|after`: the process kills itself (SIGKILL)
  at the N-th write of acknowledged changelog records to a local store: `before` it (the
  changelog has them, the local store not), or `after` it (before the input is committed).
- `FAULT_POISON_PREFIX=P`: the core raises `OverflowError` on runs whose id starts with
  `P-validate` (computing per-run metrics) and on any window holding a run whose id starts with
  `P-window` (aggregating it): a defect the contract did not exclude, on one event.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any


def install_send_failure(topic: str, after: int, how: str = "raise") -> None:
    import asyncio

    import aiokafka
    from aiokafka.errors import KafkaError

    real = aiokafka.AIOKafkaProducer.send
    seen = 0

    async def send(self: Any, to: str, *args: Any, **kwargs: Any) -> Any:
        nonlocal seen
        if to == topic:
            seen += 1
            if seen == after:
                error = KafkaError(f"injected failure of send #{after} to {topic}")
                if how == "raise":
                    raise error
                refused: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                refused.set_exception(error)
                return refused
        return await real(self, to, *args, **kwargs)

    aiokafka.AIOKafkaProducer.send = send


def install_kill_at_write(after: int, when: str) -> None:
    import signal

    from stream_app.service.table_store import PartitionedStore

    real = PartitionedStore.write
    seen = 0

    def write(self: Any, partition: int, changes: Any, offset: int | None) -> None:
        nonlocal seen
        if offset is not None:  # the worker's own write, not recovery's
            seen += 1
        if seen == after and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        real(self, partition, changes, offset)
        if seen == after and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)

    PartitionedStore.write = write  # type: ignore[method-assign]


def install_poison(prefix: str, patch: Callable[[Any, str, Any], None] = setattr) -> None:
    """`patch` sets an attribute (a test passes its monkeypatch's, which undoes it after)."""
    from stream_app.core import ingest, tier_state
    from stream_app.metrics.run_metrics import compute_run_metrics as real_metrics

    real_aggregate = tier_state.TierState.aggregate

    def compute_run_metrics(run: Any, *args: Any, **kwargs: Any) -> Any:
        if run.run_id.startswith(f"{prefix}-validate"):
            raise OverflowError("injected: per-run metrics")
        return real_metrics(run, *args, **kwargs)

    def aggregate(self: Any, config: Any) -> Any:
        if any(e.run_id.startswith(f"{prefix}-window") for e in self.window.entries):
            raise OverflowError("injected: window aggregate")
        return real_aggregate(self, config)

    patch(ingest, "compute_run_metrics", compute_run_metrics)
    patch(tier_state.TierState, "aggregate", aggregate)


def main() -> int:
    topic = os.environ.get("FAULT_FAIL_SEND_TOPIC")
    if topic:
        after = int(os.environ["FAULT_FAIL_SEND_AFTER"])
        install_send_failure(topic, after, os.environ.get("FAULT_FAIL_SEND_HOW", "raise"))
    kill_at = os.environ.get("FAULT_KILL_AT_WRITE")
    if kill_at:
        install_kill_at_write(int(kill_at), os.environ.get("FAULT_KILL_WHEN", "before"))
    prefix = os.environ.get("FAULT_POISON_PREFIX")
    if prefix:
        install_poison(prefix)
    from stream_app.cli.main import main as cli_main

    return cli_main(["worker"])


if __name__ == "__main__":
    sys.exit(main())
