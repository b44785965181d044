"""The cross-tier stage driven in-process: a dict for its table, a list for its sends."""

import json

from schemas import ReplayReport
from stream_app.core.replay import replay_lines
from stream_app.service.outputs import Outputs, Record
from stream_app.service.partitioning import partition_for
from stream_app.service.stages.cross_tier import CrossTierStage
from tests.helpers import SAMPLE_FILE
from tests.stage_doubles import Sends, Table, records, recover, samples, wiring

CHANGELOG = "evalstream-experiment-tiers-changelog"
SAMPLE = SAMPLE_FILE.read_bytes().splitlines()


def make_stage() -> tuple[CrossTierStage, Table, Sends]:
    config, sends, exporter, _ = wiring()
    table = Table(sends)
    stage = CrossTierStage(table, CHANGELOG, config, Outputs(sends, config, exporter), exporter)
    return stage, table, sends


async def fed_the_sample(stage: CrossTierStage) -> ReplayReport:
    """The stage after one batch of the sample's tier aggregates; replay's report of them."""
    report = replay_lines(SAMPLE, stage.settings)
    aggregates = [a.model_dump_json().encode() for a in report.tiers]
    await stage.handle(records(stage.settings.topics.aggregates, aggregates))
    return report


async def test_reports_equal_replay_and_each_experiment_is_written_once_per_batch() -> None:
    stage, table, sends = make_stage()
    config = stage.settings
    report = await fed_the_sample(stage)
    sent = sends.to(config.topics.cross_tier)
    expected = [r.model_dump(mode="json") for r in report.cross_tier]
    assert sent == expected
    assert sorted(k for k, _ in table.writes) == sorted(
        r.experiment_id.encode() for r in report.cross_tier
    )


def gauged(stage: CrossTierStage) -> set[str]:
    return {
        dict(labels)["experiment"]
        for (name, labels) in samples(stage.exporter)
        if name == "evalstream_experiment_cost_delta_usd"
    }


async def test_a_restart_restores_the_owned_experiments_gauges_and_a_rebalance_drops_them() -> None:
    stage, table, _ = make_stage()
    report = await fed_the_sample(stage)
    config, sends, exporter, outputs = wiring()
    again = CrossTierStage(table, CHANGELOG, config, outputs, exporter)
    experiments = [r.experiment_id for r in report.cross_tier]
    owned = {partition_for(experiments[0], 4)}
    await recover(again, owned)
    assert sends.sent == []  # nothing re-published
    assert gauged(again) == {e for e in experiments if partition_for(e, 4) in owned}
    assert gauged(again) == set(gauged(stage)) & gauged(again)
    await recover(again, set(range(4)))
    assert gauged(again) == set(experiments)
    await recover(again, set(range(4)) - owned)
    assert gauged(again) == {e for e in experiments if partition_for(e, 4) not in owned}


async def test_a_bad_state_is_quarantined_when_loaded() -> None:
    stage, table, sends = make_stage()
    config = stage.settings
    table[b"test-001"] = b'{"T0": "nope"}'
    aggregate = replay_lines(SAMPLE[:1], config).tiers[0]
    await stage.handle(records(config.topics.aggregates, [aggregate.model_dump_json().encode()]))
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "state_error"
    # the bad state's report is withdrawn, then the fresh state's follows
    assert [v is None for t, _, v, _ in sends.sent if t == config.topics.cross_tier] == [
        True,
        False,
    ]
    assert [r["tiers"] for r in sends.to(config.topics.cross_tier)] == [["T0"]]


async def test_tier_tombstones_remove_tiers_and_the_last_one_retires_the_experiment() -> None:
    stage, table, sends = make_stage()
    config = stage.settings
    report = await fed_the_sample(stage)
    experiment = report.cross_tier[0].experiment_id
    tiers = [a.tier for a in report.tiers if a.experiment_id == experiment]
    assert len(tiers) > 1
    sends.sent.clear()
    topic = config.topics.aggregates

    def tombstone(tier: str) -> Record:
        return Record(topic, 0, 0, f"{experiment}/{tier}".encode(), b"")

    await stage.handle([tombstone(tiers[0])])  # one tier retired: the report follows
    [partial] = sends.to(config.topics.cross_tier)
    assert sorted(partial["tiers"]) == sorted(tiers[1:])

    sends.sent.clear()
    await stage.handle([tombstone(t) for t in tiers[1:]])
    assert [(t, k, v) for t, k, v, _ in sends.sent if t == config.topics.cross_tier] == [
        (config.topics.cross_tier, experiment.encode(), None)
    ]
    assert experiment.encode() not in table
    assert not [
        labels
        for (name, labels) in samples(stage.exporter)
        if dict(labels).get("experiment") == experiment
    ]
    others = {r.experiment_id for r in report.cross_tier} - {experiment}
    assert {k.decode() for k in table} == others

    sends.sent.clear()  # a tombstone for an experiment it no longer has: nothing
    await stage.handle([tombstone(tiers[0])])
    assert sends.sent == []


async def test_a_tombstone_that_names_no_tier_is_a_dead_letter() -> None:
    stage, table, sends = make_stage()
    config = stage.settings
    topic = config.topics.aggregates
    await stage.handle([Record(topic, 0, 0, b"no-tier-here", b""), Record(topic, 0, 1, None, b"")])
    letters = sends.to(config.topics.dead_letter)
    assert [letter["reason"] for letter in letters] == ["processing_error"] * 2
    assert not table


async def test_a_state_stored_before_cumulative_counts_loads_and_fills_in() -> None:
    """An experiment state of four medians per tier (before the counts were kept) loads without
    quarantine; the tiers have no differences until their next aggregates bring counts."""
    stage, table, sends = make_stage()
    config = stage.settings
    report = replay_lines(SAMPLE, config)
    t0, t1 = (a for a in report.tiers if a.experiment_id == "test-001" and a.tier in ("T0", "T1"))
    medians = [t0.composite_score.median, t0.pass_rate.median, t0.impl_rate.median, 0.1]
    table[b"test-001"] = json.dumps({"T0": medians, "T1": medians}).encode()
    await stage.handle(records(config.topics.aggregates, [t1.model_dump_json().encode()]))
    assert not sends.to(config.topics.dead_letter)
    [sent] = sends.to(config.topics.cross_tier)
    assert sent["pass_rate_difference"] == {}  # the baseline has no counts yet
    await stage.handle(records(config.topics.aggregates, [t0.model_dump_json().encode()]))
    latest = sends.to(config.topics.cross_tier)[-1]
    assert set(latest["pass_rate_difference"]) == {"T1"}
