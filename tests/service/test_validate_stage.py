"""The validate stage driven in-process: a list for its sends, no broker."""

import json
from collections.abc import Callable

from schemas.run_bundle import RunBundle
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import MESSAGE_OVERHEAD_BYTES
from stream_app.service.stages.validate import ValidateStage
from tests.helpers import encode, make_event
from tests.stage_doubles import Wiring, records, samples


async def test_valid_runs_are_forwarded_by_tier_and_bad_ones_dead_lettered(
    stage_wiring: Callable[..., Wiring],
) -> None:
    config, sends, exporter, outputs = stage_wiring()
    stage = ValidateStage(config, outputs, exporter)
    batch = records(
        config.topics.input,
        [encode(make_event(run_id="a")), b"not json", encode(make_event(run_id="b", tier="T2"))],
        key=b"input-key",
    )
    await stage.handle(batch)

    bundles = sends.to(config.topics.runs_by_tier)
    assert sorted(r["run_id"] for b in bundles for r in b["runs"]) == ["a", "b"]
    assert all(RunBundle.model_validate(b) for b in bundles)
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "invalid_json"
    assert letter["payload"] == "not json"
    assert letter["origin"] == {
        "topic": config.topics.input,
        "partition": 0,
        "offset": 1,
        "key": "input-key",
        "file": None,
        "line": None,
    }
    m = samples(exporter)
    assert m[("evalstream_runs_received_total", ())] == 3
    assert m[("evalstream_runs_rejected_total", (("reason", "invalid_json"),))] == 1


async def test_a_batch_goes_out_as_one_bundle_per_target_partition_in_input_order(
    stage_wiring: Callable[..., Wiring],
) -> None:
    config, sends, exporter, outputs = stage_wiring()
    stage = ValidateStage(config, outputs, exporter)
    events = [
        encode(make_event(run_id=f"r{i}", experiment_id=f"e{i % 9}", tier=f"T{i % 7}"))
        for i in range(70)
    ]
    await stage.handle(records(config.topics.input, events))
    partitions = [p for t, _, _, p in sends.sent if t == config.topics.runs_by_tier]
    assert len(partitions) == len(set(partitions))  # one record per partition
    seen = []
    for _, key, value, partition in sends.sent:
        assert key == f"partition-{partition}".encode()
        assert value is not None
        runs = json.loads(value)["runs"]
        for r in runs:
            assert partition_for(r["experiment_id"], config.partitions) == partition
        order = [int(r["run_id"][1:]) for r in runs]
        assert order == sorted(order)
        seen += order
    assert sorted(seen) == list(range(70))
    assert len(partitions) > 1


async def test_bundles_stay_below_the_broker_message_limit(
    stage_wiring: Callable[..., Wiring],
) -> None:
    config, sends, exporter, outputs = stage_wiring(
        broker_max_message_bytes=128 * 1024, dead_letter_cap=16 * 1024
    )
    stage = ValidateStage(config, outputs, exporter)
    events = [encode(make_event(run_id=f"r{i:04d}", tier="T1")) for i in range(1000)]
    await stage.handle(records(config.topics.input, events))
    values = [v for t, _, v, _ in sends.sent if t == config.topics.runs_by_tier]
    assert len(values) > 1
    limit = config.broker_max_message_bytes - MESSAGE_OVERHEAD_BYTES
    assert all(v is not None and len(v) <= limit for v in values)
    runs = [r["run_id"] for v in values for r in json.loads(v)["runs"]]  # type: ignore[arg-type]
    assert runs == [f"r{i:04d}" for i in range(1000)]
