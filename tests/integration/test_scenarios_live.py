"""The scenarios of `tests/scenarios.py` through a live worker on the test broker: its outputs
equal `replay` of the same lines, and it dead-letters the messages replay rejects (the same
scenarios run through the in-memory chain in `tests/test_scenarios.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stream_app.service.settings import Settings
from tests.integration.harness import (
    Broker,
    Mismatch,
    Worker,
    latest,
    produce_lines,
    records,
    settings_for,
    wait_until,
)
from tests.scenarios import (
    IDLE_TTL_S,
    SCENARIOS,
    SHAREABLE,
    dead_letter_reasons,
    expected_outputs,
)


def outputs_are(settings: Settings, lines: list[bytes], retire: bool = False) -> bool | Mismatch:
    """True when the worker's latest outputs and its dead letters are replay's."""
    aggs, cross, rejected = expected_outputs(lines, settings, retire=retire)
    got_aggs = latest(settings, settings.topics.aggregates)
    got_cross = latest(settings, settings.topics.cross_tier)
    letters = [json.loads(r.value) for r in records(settings, settings.topics.dead_letter)]
    got_rejected = dead_letter_reasons(letters)
    wrong = [
        name
        for name, want, got in (
            ("aggregates", aggs, got_aggs),
            ("cross-tier reports", cross, got_cross),
            ("dead letters", rejected, got_rejected),
        )
        if want != got
    ]
    if not wrong:
        return True
    keys = sorted(k.decode() for k in aggs.keys() ^ got_aggs.keys())[:5]
    return Mismatch(f"{', '.join(wrong)} differ (tiers only on one side: {keys})")


def test_every_scenario_through_one_live_worker(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """The scenarios without a pause share one worker: their experiments are their own."""
    settings = settings_for(broker)
    worker = Worker(broker, tmp_path, "worker")
    workers.append(worker.start().wait_ready())
    lines = [line for scenario in SHAREABLE for line in scenario.lines]
    produce_lines(settings, lines)
    wait_until(lambda: outputs_are(settings, lines), 90, what="outputs equal replay")
    worker.assert_alive()


def test_retirement_through_a_live_worker(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """An experiment idle for its TTL retires on the worker's own clock; replay retires it in
    event time; after the rest of the stream both say the same."""
    (scenario,) = [s for s in SCENARIOS if s.idle_after is not None]
    settings = settings_for(broker, experiment_idle_ttl_s=IDLE_TTL_S)
    env: dict[str, Any] = {
        "EVALSTREAM_EXPERIMENT_IDLE_TTL_S": str(IDLE_TTL_S),
        "EVALSTREAM_RETIRE_CHECK_S": "0.5",
    }
    worker = Worker(broker, tmp_path, "worker", **env)
    workers.append(worker.start().wait_ready())
    before, after = scenario.phases()
    produce_lines(settings, before)
    wait_until(lambda: outputs_are(settings, before), 60, what="the first phase")
    wait_until(
        lambda: worker.metrics().get(("evalstream_experiments_retired_total", ()), 0) >= 1,
        3 * IDLE_TTL_S,
        what="the idle experiment retired",
    )
    produce_lines(settings, after)
    # Within the TTL of the last runs: the worker must not have retired them yet.
    wait_until(
        lambda: outputs_are(settings, [*before, *after], retire=True),
        IDLE_TTL_S,
        interval=0.5,
        what="outputs equal replay with retirement",
    )
    worker.assert_alive()
