"""One live worker on the test broker, fed the real sample, bad input and redeliveries:
outputs equal `replay`, every rejection is dead-lettered byte-exact, /metrics tells the truth."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from stream_app.metrics.grades import grade_points
from stream_app.service.settings import Settings
from tests.helpers import SAMPLE_FILE, encode, make_event
from tests.integration.harness import (
    Worker,
    expected_outputs,
    latest,
    make_broker,
    outputs_equal_replay,
    produce_lines,
    records,
    settings_for,
    wait_until,
)

# One worker runs the module: its fixtures are made once, not once per pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("worker-pipeline")

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()
BAD: dict[str, bytes] = {
    "invalid_json": b'{"run_id": "broken", ',
    "not_utf8": b"\xff\xfe\x00\x80 not text",
    "schema": encode(make_event(run_id="bad-bool", passed=1)),
    "too_large": encode(make_event(run_id="huge", subtest="x" * 2000)),
}
REASONS = {
    "invalid_json": "invalid_json",
    "not_utf8": "invalid_json",
    "schema": "schema",
    "too_large": "too_large",
}
UNPRICED = encode(  # a model no source prices: an experiment of its own, its costs unknown
    make_event(run_id="no-price", experiment_id="unpriced", model="mystery-9", cost_usd=None)
)
RUNS = [*SAMPLE, UNPRICED]
DUPLICATES = SAMPLE[:20]
STREAM = SAMPLE[:100] + list(BAD.values()) + [UNPRICED] + SAMPLE[100:] + DUPLICATES


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Worker]]:
    workdir = tmp_path_factory.mktemp("pipeline")
    with make_broker(workdir / "broker.log") as broker:
        worker = Worker(  # every statistic exported, to check each against the aggregates
            broker,
            workdir,
            "worker",
            EVALSTREAM_MAX_MESSAGE_BYTES="1500",
            EVALSTREAM_EXPORTED_STATISTICS="all",
        ).start()
        try:
            worker.wait_ready()
            settings = settings_for(broker, max_message_bytes=1500)
            produce_lines(settings, STREAM)
            wait_until(
                lambda: outputs_equal_replay(settings, RUNS),
                timeout=60,
                what="tier-aggregates and cross-tier-reports equal to replay",
            )
            # Redelivered runs change no output: wait until the worker has handled every message.
            windowed = ("evalstream_processing_seconds_count", (("stage", "window"),))
            wait_until(
                lambda: worker.metrics().get(windowed) == len(STREAM) - len(BAD),
                timeout=60,
                what="every accepted message through the window stage",
            )
            yield settings, worker
        finally:
            code = worker.stop()
            assert code == 0, f"worker did not stop cleanly ({code}):\n{worker.log()}"


def test_last_outputs_equal_replay(pipeline: tuple[Settings, Worker]) -> None:
    settings, _ = pipeline
    aggs, cross = expected_outputs(settings, RUNS)
    assert latest(settings, settings.topics.aggregates) == aggs
    assert latest(settings, settings.topics.cross_tier) == cross
    assert len(aggs) == 22
    assert len(cross) == 4
    unpriced = aggs[b"unpriced/T0"]
    assert (unpriced["cost_usd"], unpriced["cost_of_pass"]) == (None, None)
    assert cross[b"unpriced"]["cost_delta"] is None


def test_every_rejection_is_dead_lettered_byte_exact(pipeline: tuple[Settings, Worker]) -> None:
    settings, _ = pipeline
    letters = [json.loads(r.value) for r in records(settings, settings.topics.dead_letter)]
    assert len(letters) == len(BAD)
    by_payload: dict[bytes, dict[str, Any]] = {}
    for letter in letters:
        raw = (
            base64.b64decode(letter["payload"])
            if letter["payload_encoding"] == "base64"
            else letter["payload"].encode()
        )
        assert letter["payload_size"] == len(raw)
        by_payload[raw] = letter
    for name, raw in BAD.items():
        assert raw in by_payload, f"{name} missing from the DLQ"
        letter = by_payload[raw]
        assert letter["reason"] == REASONS[name]
        assert letter["origin"]["topic"] == settings.topics.input
        assert letter["origin"]["offset"] >= 0
    assert by_payload[BAD["not_utf8"]]["payload_encoding"] == "base64"
    assert by_payload[BAD["schema"]]["detail"][0]["loc"] == ["passed"]


def test_metrics_describe_the_known_input(pipeline: tuple[Settings, Worker]) -> None:
    settings, worker = pipeline
    m = worker.metrics()
    total = len(RUNS) + len(BAD) + len(DUPLICATES)
    assert m[("evalstream_runs_received_total", ())] == total
    for name, reason in REASONS.items():
        expected = sum(1 for n, r in REASONS.items() if r == reason)
        assert m[("evalstream_runs_rejected_total", (("reason", reason),))] == expected, name
    # Which valid runs are ignored, and as duplicate or late, depends on arrival order (the input
    # spreads over partitions: an older run can reach a window already full of newer ones). What
    # does not: every valid message is accepted or ignored, every redelivered pair ignores one.
    valid = len(STREAM) - len(BAD)
    duplicate = m[("evalstream_runs_ignored_total", (("reason", "duplicate"),))]
    late = m[("evalstream_runs_ignored_total", (("reason", "late"),))]
    accepted = sum(v for (name, _), v in m.items() if name == "evalstream_runs_accepted_total")
    assert accepted + duplicate + late == valid
    assert duplicate + late >= len(DUPLICATES)
    assert duplicate > 0

    def gauge(name: str, **labels: str) -> float:
        return m[(name, tuple(sorted(labels.items())))]

    aggs, cross = expected_outputs(settings, RUNS)
    series = {(name, dict(labels).get("experiment")) for name, labels in m}
    for agg in aggs.values():
        tier = {"experiment": agg["experiment_id"], "tier": agg["tier"]}
        assert gauge("evalstream_tier_grade_points", **tier) == grade_points(agg["grade"])
        assert gauge("evalstream_tier_window_runs", **tier) == agg["runs"]
        for stat in ("median", "mean", "mode", "min", "max", "std_dev"):
            value = gauge("evalstream_tier_composite_score", **tier, stat=stat)
            assert value == agg["composite_score"][stat]
        if agg["cost_of_pass"] is None:  # unpriced: no cost series at all, never a $0
            for name in ("evalstream_tier_cost_usd", "evalstream_tier_cost_of_pass_usd"):
                assert (name, agg["experiment_id"]) not in series
        else:
            cost_of_pass = gauge("evalstream_tier_cost_of_pass_usd", **tier, stat="max")
            assert cost_of_pass == float(agg["cost_of_pass"]["max"])
        for k, value in agg["pass_at_k"].items():
            assert gauge("evalstream_tier_pass_at_k", **tier, k=k) == value
    for report in cross.values():
        exp = {"experiment": report["experiment_id"]}
        if report["cost_delta"] is None:
            assert ("evalstream_experiment_cost_delta_usd", exp["experiment"]) not in series
        else:
            assert gauge("evalstream_experiment_cost_delta_usd", **exp) == report["cost_delta"]
        variance = gauge("evalstream_experiment_pass_rate_variance", **exp)
        assert variance == report["pass_rate_variance"]
        for tier_name, uplift in report["tier_uplift"].items():
            assert gauge("evalstream_tier_uplift_ratio", **exp, tier=tier_name) == uplift
    assert gauge("evalstream_processing_seconds_count", stage="window") == len(STREAM) - len(BAD)
    assert gauge("evalstream_run_age_seconds_count") == accepted
    assert any(name == "evalstream_build_info" for name, _ in m)
    assert not any("run_id" in dict(labels) for _, labels in m)  # bounded cardinality


def test_health_endpoints(pipeline: tuple[Settings, Worker]) -> None:
    _, worker = pipeline
    status, body = worker.get("/healthz")
    assert status == 200
    assert json.loads(body)["status"] == "alive"
    status, body = worker.get("/readyz")
    assert status == 200
    assert json.loads(body)["ready"] is True
