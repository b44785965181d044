"""The validate stage driven in-process: a list for its sends, no broker."""

import asyncio
import json

from stage_doubles import records, samples, wiring

from helpers import encode, make_event
from stream_app.service.stages.validate import ValidateStage


def test_valid_runs_are_forwarded_by_tier_and_bad_ones_dead_lettered() -> None:
    config, sends, metrics, outputs = wiring()
    stage = ValidateStage(config, outputs, metrics)
    batch = records(
        config.topics.input,
        [encode(make_event(run_id="a")), b"not json", encode(make_event(run_id="b", tier="T2"))],
        key=b"input-key",
    )
    asyncio.run(stage.handle(batch))

    forwarded = sends.to(config.topics.runs_by_tier)
    assert [r["run_id"] for r in forwarded] == ["a", "b"]
    assert sends.keys(config.topics.runs_by_tier) == [b"exp/T0", b"exp/T2"]
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
    m = samples(metrics)
    assert m[("evalstream_runs_received_total", ())] == 3
    assert m[("evalstream_runs_rejected_total", (("reason", "invalid_json"),))] == 1


def test_forwarded_runs_land_on_the_partition_of_their_tier() -> None:
    from stream_app.service.partitioning import partition_for

    config, sends, metrics, outputs = wiring()
    stage = ValidateStage(config, outputs, metrics)
    events = [encode(make_event(run_id=f"r{i}", tier=f"T{i}")) for i in range(7)]
    asyncio.run(stage.handle(records(config.topics.input, events)))
    for _, key, value, partition in sends.sent:
        assert key is not None
        assert partition == partition_for(key, config.partitions)
        assert json.loads(value)["tier"] == key.decode().split("/")[1]
