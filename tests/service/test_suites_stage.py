"""The suite stage driven in-process: a dict for its table, a list for its sends, no broker. One
record per experiment of a suite tier, a record of the old one-per-suite format migrated and not
quarantined, a bad record quarantined alone, retirement, and recovery of the owned suites."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from stream_app.core.suite.evidence import SIZE
from stream_app.core.suite.message import SuiteMessage, SuiteRun
from stream_app.service.outputs import Outputs
from stream_app.service.partitioning import partition_for
from stream_app.service.stages.suites import SuitesStage, mark_key, record_key
from stream_app.service.stages.table_stage import Revoked
from tests.stage_doubles import Sends, Table, records, recover, samples, turns_during, wiring

CHANGELOG = "evalstream-suite-states-changelog"
HOUR_US = 3_600_000_000


def stage_with() -> tuple[SuitesStage, Sends, Table]:
    config, sends, exporter, _ = wiring()
    table = Table(sends)
    stage = SuitesStage(table, CHANGELOG, config, Outputs(sends, config, exporter), exporter)
    return stage, sends, table


def message(
    experiment: str,
    *seqs: int,
    suite: str = "agent",
    epoch: int = 7,
    tier: str = "T1",
    passed: bool = True,
) -> bytes:
    runs = tuple(
        SuiteRun(experiment, epoch, s, s * HOUR_US, (s,) * SIZE, passed, 0.75 * passed)
        for s in seqs
    )
    return SuiteMessage(suite, tier, runs).to_json()


async def test_a_suites_tiers_are_published_together_with_their_differences() -> None:
    """Every tier of a suite is published when any of them changes: a baseline's run moves the
    other tiers' differences. The baseline has no difference; a tier's covers the experiments
    both have runs in."""
    stage, sends, table = stage_with()
    topic = stage.settings.topics.suite_feed
    tiers_topic = stage.settings.topics.suite_tiers
    batch = [
        message("a", 1, 2, 3, tier="T1", passed=True),
        message("b", 1, 2, tier="T1", passed=False),
        message("c", 1, tier="T1", passed=True),
        message("a", 1, 2, tier="T0", passed=False),
        message("b", 1, 2, tier="T0", passed=False),
    ]
    await stage.handle(records(topic, batch))
    t0, t1 = sends.to(tiers_topic)
    assert (t0["tier"], t1["tier"]) == ("T0", "T1")
    assert (t0["experiments"], t0["pass_rate_difference"]) == (2, None)
    assert t0["pass_rate"]["estimate"] == 0.0
    assert (t1["experiments"], t1["experiments_with_runs"]) == (2, 3)
    assert t1["pass_rate"]["estimate"] == pytest.approx((1 + 0 + 1) / 3)
    difference = t1["pass_rate_difference"]
    assert difference["estimate"] == pytest.approx(((1 - 0) + (0 - 0)) / 2)
    assert difference["low"] <= difference["estimate"] <= difference["high"]
    sends.sent.clear()
    await stage.handle(records(topic, [message("c", 1, tier="T0", passed=True)]))
    t0, t1 = sends.to(tiers_topic)  # T1 again, though none of its runs came
    assert t1["experiments"] == 3
    assert t1["pass_rate_difference"]["estimate"] == pytest.approx((1 + 0 + 0) / 3)
    again, again_sends = restarted(table)
    await recover(again, set(range(stage.settings.partitions)))
    assert again_sends.sent == []  # restored, not re-published
    assert sorted(again.exporter.suites.suites) == [("agent", "T0"), ("agent", "T1")]
    assert json.loads(again.exporter.suites.suites[("agent", "T1")].json) == t1
    spread = (1 - 1 / 2) ** 2 + (1 - 3 / 4) ** 2 + (1 - 5 / 6) ** 2  # about (P + 1/2) / (n + 1)
    # each composite 0.75, about (sum + 1/2) / (n + 1) too
    composite_spread = (0.75 - 1 / 2) ** 2 + (0.75 - 1.25 / 2) ** 2 + (0.75 - 2 / 3) ** 2
    stored = json.loads(table[record_key("agent/T1", "a")])["o"]  # and its first and latest run
    assert stored == [
        3,
        3,
        pytest.approx(spread),
        2.25,
        pytest.approx(composite_spread),
        1 * HOUR_US,
        3 * HOUR_US,
    ]


async def test_a_tier_quarantined_while_its_suite_is_published_is_withdrawn() -> None:
    """A batch of T1 alone loads T0 to compare with; T0's only record cannot load: it is
    quarantined, and T0 withdrawn, not left on the topic and in the gauges."""
    stage, sends, table = stage_with()
    topic = stage.settings.topics.suite_feed
    both = [message("a", 1, 2, tier="T0", passed=True), message("a", 1, 2, passed=False)]
    await stage.handle(records(topic, both))
    table[record_key("agent/T0", "a")] = b'{"e": 1}'
    stage.drop_cache()
    sends.sent.clear()
    await stage.handle(records(topic, [message("a", 3, passed=True)]))
    assert len(sends.to(stage.settings.topics.dead_letter)) == 1
    assert sends.tombstones(stage.settings.topics.suite_tiers) == [b"agent/T0"]
    assert ("agent", "T0") not in stage.exporter.suites.suites
    [t1] = sends.to(stage.settings.topics.suite_tiers)
    assert (t1["tier"], t1["pass_rate_difference"]) == ("T1", None)


async def test_a_share_without_outcomes_is_quarantined() -> None:
    """No release stored a share without its outcomes: one is not a share some runs make
    (docs/architecture.md, 'Stored formats')."""
    stage, sends, table = stage_with()
    topic = stage.settings.topics.suite_feed
    await stage.handle(records(topic, [message("a", 1, 2), message("b", 1)]))
    old = json.loads(table[record_key("agent/T1", "a")])
    del old["o"]
    table[record_key("agent/T1", "a")] = json.dumps(old).encode()
    stage.drop_cache()
    await stage.handle(records(topic, [message("b", 2, passed=False)]))
    [letter] = sends.to(stage.settings.topics.dead_letter)
    assert letter["reason"] == "state_error"
    report = sends.to(stage.settings.topics.suite_tiers)[-1]
    assert (report["experiments_with_runs"], report["runs"]) == (1, 2)


async def test_each_experiment_is_a_record_on_its_suites_partition() -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    topic = config.topics.suite_feed
    await stage.handle(records(topic, [message("a", 1, 2), message("b", 1), message("a", 2, 3)]))
    keys = [json.loads(key) for key, _ in table.writes]
    # each once a batch; then the suite tier's mark, what made its published report
    assert keys == [["agent", "T1", "a"], ["agent", "T1", "b"], ["agent", "T1"]]
    assert json.loads(table[record_key("agent/T1", "a")])["n"] == 3  # 1, 2, 3: the repeat dropped
    [report] = sends.to(config.topics.suite_tiers)
    assert (report["experiments_with_runs"], report["runs"]) == (2, 4)
    assert {p for t, _, _, p in sends.sent if t == config.topics.suite_tiers} == {
        partition_for("agent", config.partitions)
    }
    assert {stage.partition_of(k) for k in table} == {partition_for("agent", config.partitions)}


async def test_a_record_under_a_key_that_is_not_a_shares_is_quarantined() -> None:
    """One record per suite tier was a format no release wrote: its key is not a share's, and
    the record is quarantined like any that cannot load; the suite tier starts afresh."""
    stage, sends, table = stage_with()
    config = stage.settings
    old = {"seen": {"a": 5, "b": 2}, "hours": [], "days": {}, "runs": 7, "top": None}
    table[b"agent/T1"] = json.dumps(old).encode()
    await recover(stage, set(range(config.partitions)))
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "state_error"
    assert not table
    assert sends.tombstones(config.topics.suite_tiers) == [b"agent/T1"]
    await stage.handle(records(config.topics.suite_feed, [message("a", 1), message("b", 1)]))
    assert set(table) == {
        record_key("agent/T1", "a"),
        record_key("agent/T1", "b"),
        mark_key("agent/T1"),
    }
    assert sends.to(config.topics.suite_tiers)[-1]["runs"] == 2


async def test_a_share_under_a_key_spelled_otherwise_is_quarantined_not_loaded() -> None:
    """A share's record under a key `record_key` would not write (the same list, without its
    spaces): quarantined like a key that is no share's, not taken for experiment `a`'s share
    (the stage reads a share by the key it writes); `b`'s is loaded beside it."""
    first, _, stored = stage_with()
    config = first.settings
    await first.handle(records(config.topics.suite_feed, [message("a", 1), message("b", 1)]))
    stage, sends, table = stage_with()
    table.update(stored)
    table[b'["agent","T1","a"]'] = table.pop(record_key("agent/T1", "a"))
    await stage.handle(records(config.topics.suite_feed, [message("b", 2)]))
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "state_error"
    assert set(table) == {record_key("agent/T1", "b"), mark_key("agent/T1")}
    [report] = sends.to(config.topics.suite_tiers)
    assert (report["experiments_with_runs"], report["runs"]) == (1, 2)


async def test_a_record_that_cannot_load_is_quarantined_alone() -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    topic = config.topics.suite_feed
    await stage.handle(records(topic, [message("a", 1, 2), message("b", 1)]))
    table[record_key("agent/T1", "b")] = b'{"e": 1}'
    stage.drop_cache()
    await stage.handle(records(topic, [message("a", 3)]))
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "state_error"
    assert record_key("agent/T1", "b") not in table
    assert sends.to(config.topics.suite_tiers)[-1]["experiments_with_runs"] == 1  # a, without b


async def test_a_quarantine_the_batch_changes_nothing_of_is_published_all_the_same() -> None:
    """The batch that finds a bad record may bring only repeats (nothing to fold): the suite
    tier is published again without it, or withdrawn when it was the only one."""
    stage, sends, table = stage_with()
    config = stage.settings
    topic = config.topics.suite_feed
    await stage.handle(
        records(topic, [message("a", 1), message("b", 1), message("c", 1, suite="x")])
    )
    table[record_key("agent/T1", "b")] = b"[]"
    table[record_key("x/T1", "c")] = b"{}"
    stage.drop_cache()
    nothing = SuiteMessage("x", "T1", retired=("unknown",)).to_json()
    await stage.handle(records(topic, [message("a", 1), nothing]))  # a repeat; no change
    assert len(sends.to(config.topics.dead_letter)) == 2
    assert sends.to(config.topics.suite_tiers)[-1]["experiments_with_runs"] == 1
    assert ("agent", "T1") in stage.exporter.suites.suites
    assert b"x/T1" in sends.tombstones(config.topics.suite_tiers)
    assert ("x", "T1") not in stage.exporter.suites.suites


async def test_retiring_every_experiment_withdraws_the_suite_tier() -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    topic = config.topics.suite_feed
    await stage.handle(records(topic, [message("a", 1), message("b", 1)]))
    assert ("agent", "T1") in stage.exporter.suites.suites
    retire = SuiteMessage("agent", "T1", retired=("a",)).to_json()
    await stage.handle(records(topic, [retire]))
    assert set(table) == {record_key("agent/T1", "b"), mark_key("agent/T1")}
    assert sends.to(config.topics.suite_tiers)[-1]["experiments_with_runs"] == 1
    await stage.handle(records(topic, [SuiteMessage("agent", "T1", retired=("b",)).to_json()]))
    assert not table
    assert sends.tombstones(config.topics.suite_tiers) == [b"agent/T1"]
    assert ("agent", "T1") not in stage.exporter.suites.suites
    m = samples(stage.exporter)
    assert not any(name.startswith("evalstream_suite") for name, _ in m)


def gauged(stage: SuitesStage) -> set[str]:
    """The suites with gauges on the stage's exporter."""
    return {suite for suite, _ in stage.exporter.suites.suites}


async def test_a_restart_restores_the_owned_suite_tiers_gauges_and_publishes_nothing() -> None:
    stage, _, table = stage_with()
    config = stage.settings
    topic = config.topics.suite_feed
    suites = [f"agent-{k}" for k in range(8)]
    await stage.handle(records(topic, [message("a", 1, suite=s) for s in suites]))
    again, sends = restarted(table)
    owned = {0, 2}
    count = await recover(again, owned)
    expected = {s for s in suites if partition_for(s, config.partitions) in owned}
    assert sends.sent == []
    assert gauged(again) == expected
    assert count == len(expected)
    assert 0 < count < len(suites)


async def test_a_restoration_gives_the_event_loop_back_while_it_makes_a_suite_tier() -> None:
    """One suite tier is made from every experiment's share at once: 100,000 shares with
    100,000 tiers, seconds during which probes and scrapes must still be answered."""
    stage, _, table = stage_with()
    topic = stage.settings.topics.suite_feed
    await stage.handle(records(topic, [message(f"e{i}", 1) for i in range(40)]))
    every = set(range(stage.settings.partitions))
    for slice_s, turns in ((0.0, range(40, 1000)), (3600.0, range(3))):
        again, _ = restarted(table)
        again.recovery_slice_s, again.rest_s = slice_s, 0.0  # turns of no length, counted
        assert await turns_during(again.restore_gauges(every, again.generation)) in turns


async def test_a_share_quarantined_while_gauges_are_restored_republishes_its_suite_tier() -> None:
    """Its suite tier's report on `suite-tiers` still counts the share: restored without it,
    the report is published again, not only its gauges set."""
    stage, _, table = stage_with()
    config = stage.settings
    await stage.handle(records(config.topics.suite_feed, [message("a", 1), message("b", 1)]))
    table[record_key("agent/T1", "b")] = b'{"e": 1}'
    again, sends = restarted(table)
    await recover(again, set(range(config.partitions)))
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "state_error"
    assert sends.to(config.topics.suite_tiers)[-1]["experiments_with_runs"] == 1


def restarted(table: Table, **overrides: Any) -> tuple[SuitesStage, Sends]:
    """A new worker's stage over the same table (its settings with `overrides`)."""
    config, sends, exporter, outputs = wiring(**overrides)
    return SuitesStage(table, CHANGELOG, config, outputs, exporter), sends


async def test_a_start_under_other_settings_publishes_every_suite_again_once() -> None:
    """A suite tier's report depends on the core's settings (here the baseline tier): a worker
    started with others publishes each owned suite again, made as it makes them, and marks it;
    the next start under the same settings publishes nothing."""
    stage, _, table = stage_with()
    topic = stage.settings.topics.suite_feed
    suites = [f"agent-{k}" for k in range(4)]
    batch = [message(e, 1, suite=s, tier=t) for s in suites for e in "ab" for t in ("T0", "T1")]
    await stage.handle(records(topic, batch))
    every = set(range(stage.settings.partitions))
    again, sends = restarted(table, baseline_tier="T1")
    assert await recover(again, every) == len(suites)
    reports = sends.to(again.settings.topics.suite_tiers)
    assert sorted((r["suite"], r["tier"]) for r in reports) == sorted(
        (s, t) for s in suites for t in ("T0", "T1")
    )
    assert {r["baseline_tier"] for r in reports} == {"T1"}
    assert {table[mark_key(f"{s}/{t}")] for s in suites for t in ("T0", "T1")} == {again.made_by}
    third, sends = restarted(table, baseline_tier="T1")
    await recover(third, every)
    assert sends.sent == []
    assert gauged(third) == set(suites)


async def test_a_mark_its_records_did_not_outlive_is_withdrawn_at_the_next_start() -> None:
    """A crash between the deletion of a withdrawn suite tier's last records and its mark's
    leaves the mark alone; the next start withdraws the suite tier again and deletes it."""
    stage, _, table = stage_with()
    config = stage.settings
    await stage.handle(records(config.topics.suite_feed, [message("a", 1)]))
    mark = table[mark_key("agent/T1")]
    retire = SuiteMessage("agent", "T1", retired=("a",)).to_json()
    await stage.handle(records(config.topics.suite_feed, [retire]))
    assert not table
    table[mark_key("agent/T1")] = mark
    again, sends = restarted(table)
    await recover(again, set(range(config.partitions)))
    assert not table
    assert sends.tombstones(config.topics.suite_tiers) == [b"agent/T1"]
    assert gauged(again) == set()


async def test_suite_tiers_published_before_marks_were_kept_are_published_once() -> None:
    stage, _, table = stage_with()
    topic = stage.settings.topics.suite_feed
    await stage.handle(records(topic, [message("a", 1), message("b", 1)]))
    del table[mark_key("agent/T1")]
    every = set(range(stage.settings.partitions))
    again, sends = restarted(table)
    await recover(again, every)
    [report] = sends.to(again.settings.topics.suite_tiers)
    assert report["experiments_with_runs"] == 2
    assert table[mark_key("agent/T1")] == again.made_by
    third, sends = restarted(table)
    await recover(third, every)
    assert sends.sent == []


async def restoring(messages: list[bytes]) -> tuple[SuitesStage, Sends, asyncio.Task[int]]:
    """A restarted stage over the records of `messages`, restoring with a pause per record."""
    stage, _, table = stage_with()
    await stage.handle(records(stage.settings.topics.suite_feed, messages))
    again, sends = restarted(table)
    again.recovery_slice_s = 0.0
    every = set(range(again.settings.partitions))
    newly = await again.on_recover(every)
    return again, sends, asyncio.create_task(again.restore_gauges(newly, again.generation))


async def test_a_restoration_revoked_while_it_makes_the_suite_tiers_stops() -> None:
    stage, sends, restoration = await restoring(
        [message(f"e{i}", 1, suite=f"a{i % 8}") for i in range(40)]
    )
    for _ in range(5):
        await asyncio.sleep(0)
    stage.on_revoked({0, 1})
    with pytest.raises(Revoked):
        await restoration
    assert len(gauged(stage)) < 8
    assert sends.sent == []


async def test_a_restoration_revoked_between_suites_stops_there() -> None:
    """Each suite's tiers give the loop back: a revocation there stops the rest."""
    stage, sends, restoration = await restoring([message("e", 1, suite=f"a{k}") for k in range(8)])
    while not gauged(stage):
        await asyncio.sleep(0)
    stage.on_revoked(set(range(stage.settings.partitions)))
    with pytest.raises(Revoked):
        await restoration
    assert 0 < len(gauged(stage)) < 8
    assert sends.sent == []


async def test_a_message_that_is_not_one_is_dead_lettered() -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    bad = [b"[1, 2]", b'{"v": 2, "suite": "", "tier": "T1"}', b'{"v": 3}', b"\xff"]
    await stage.handle(records(config.topics.suite_feed, [*bad, message("a", 1)]))
    assert len(sends.to(config.topics.dead_letter)) == len(bad)
    assert set(table) == {record_key("agent/T1", "a"), mark_key("agent/T1")}


async def test_retiring_thousands_of_long_named_experiments_fits_the_broker() -> None:
    """A retirement is split like runs: every message below the broker's limit."""
    from stream_app.service.settings import MESSAGE_OVERHEAD_BYTES

    stage, sends, _ = stage_with()
    names = [f"{k:04d}" + "\x01" * 196 for k in range(2000)]  # 1,200 bytes each as JSON
    await stage.outputs.retire_from_suite("agent", "T1", names)
    sent = [v for t, _, v, _ in sends.sent if t == stage.settings.topics.suite_feed]
    limit = stage.settings.broker_max_message_bytes - MESSAGE_OVERHEAD_BYTES
    assert len(sent) > 1
    assert all(v is not None and len(v) <= limit for v in sent)
    retired = [e for v in sent if v is not None for e in SuiteMessage.from_json(v).retired]
    assert retired == names
