"""The worker's batches on Apache Kafka: a backlog is taken in batches of thousands, a quiet
input one event at a time, at once, even with a long `batch_within_s` (nothing waits while
nothing is on its way), the suite hop's batches paced by `suite_interval_s`, and what the worker
publishes is still `replay`'s."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from stream_app.processes.worker_process import Samples, metric_total
from stream_app.service.settings import Settings
from stream_app.synthetic import synthetic_lines
from tests.integration.harness import (
    Broker,
    Worker,
    outputs_equal_replay,
    produce_lines,
    settings_for,
    wait_until,
)

BACKLOG = 6000
QUIET = 5
WITHIN = 20.0
SUITE_INTERVAL = 10.0


def handled(samples: Samples) -> float:
    return metric_total(samples, "evalstream_processing_seconds_count", stage="validate")


def batches(samples: Samples, stage: str) -> float:
    return metric_total(samples, "evalstream_batch_records_count", stage=stage)


def batches_within(samples: Samples, records: int) -> float:
    """Validate batches of at most `records` records (the histogram's cumulative bucket)."""
    return metric_total(
        samples, "evalstream_batch_records_bucket", stage="validate", le=f"{records:.1f}"
    )


def produce_alone(settings: Settings, worker: Worker, line: bytes, total: int) -> None:
    """Produce `line` and check the worker handles it, its `total`-th run, well before a batch
    waiting WITHIN seconds for company would have."""
    produce_lines(settings, [line])
    sent = time.monotonic()
    wait_until(
        lambda: handled(worker.metrics()) == total, 2 * WITHIN, interval=0.05, what=f"run {total}"
    )
    took = time.monotonic() - sent
    assert took < WITHIN / 2, f"run {total} waited {took:.1f} s for company"


def test_a_backlog_goes_in_big_batches_a_quiet_input_one_event_at_a_time(
    tmp_path: Path, broker: Broker
) -> None:
    settings = settings_for(broker)
    start = datetime(2027, 3, 1, tzinfo=UTC)
    backlog = list(synthetic_lines(BACKLOG, experiments=20, seed=3, start=start))
    produce_lines(settings, backlog)  # waiting before the worker starts
    worker = Worker(
        broker,
        tmp_path,
        "worker",
        EVALSTREAM_BATCH_WITHIN_S=f"{WITHIN}",
        EVALSTREAM_SUITE_INTERVAL_S=f"{SUITE_INTERVAL}",
    ).start()
    try:
        worker.wait_ready()
        wait_until(lambda: handled(worker.metrics()) == BACKLOG, 120, what="the backlog")
        samples = worker.metrics()
        total = batches(samples, "validate")
        assert total - batches_within(samples, 1000) >= 1, "no batch beyond 1,000 runs"
        assert total < BACKLOG / 100, f"{total:.0f} batches for {BACKLOG} runs"

        # Quiet: each run is produced once the one before it is handled, so nothing else
        # is on its way. A batch that waited its `batch_within_s` for more would hold each
        # run WITHIN seconds; each goes alone at once. (Runs produced at a fixed pace may
        # rightly share a batch: a busy worker takes together what waited meanwhile.)
        singles = batches_within(samples, 1)
        # The suite hop done with the backlog too (its outputs are replay's): a batch of it
        # still running would be counted below, as if the quiet runs had made it.
        wait_until(
            lambda: outputs_equal_replay(settings, backlog), 60, what="the backlog's outputs"
        )
        suite_batches = batches(worker.metrics(), "suite")
        later = list(synthetic_lines(QUIET, experiments=1, seed=4, start=start, prefix="quiet"))
        began = time.monotonic()
        for n, line in enumerate(later, start=1):
            produce_alone(settings, worker, line, BACKLOG + n)
        assert batches_within(worker.metrics(), 1) - singles == QUIET
        wait_until(
            lambda: outputs_equal_replay(settings, backlog + later),
            timeout=60,
            what="outputs equal to replay",
        )
        # The suite hop, paced, takes them in batches at least SUITE_INTERVAL apart.
        paced = 1 + (time.monotonic() - began) // SUITE_INTERVAL
        assert batches(worker.metrics(), "suite") - suite_batches <= paced
    finally:
        code = worker.stop()
    assert code == 0, f"worker did not stop cleanly ({code}):\n{worker.log()}"
