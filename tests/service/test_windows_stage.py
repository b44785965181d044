"""The windows stage driven in-process: a dict for its table, a list for its sends, no broker."""

import asyncio
import json
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from schemas.aggregates import TierAggregate
from schemas.run_bundle import bundle_runs
from stream_app.core.keys import tier_key
from stream_app.core.replay import replay_lines
from stream_app.core.tier_state import TierState
from stream_app.core.window import to_epoch_us
from stream_app.service.aggregate_collector import AggregateCollector
from stream_app.service.outputs import Outputs
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import MESSAGE_OVERHEAD_BYTES, Settings
from stream_app.service.stages.table_stage import Pauses, Revoked
from stream_app.service.stages.windows import WindowsStage
from tests.helpers import encode, make_event
from tests.stage_doubles import (
    Sends,
    Table,
    forwarded,
    metrics_json,
    records,
    recover,
    samples,
    turns_during,
    wiring,
)

CHANGELOG = "evalstream-tier-windows-changelog"


def run(n: int, tier: str = "T1", passed: bool = True, experiment: str = "exp") -> dict[str, Any]:
    return make_event(
        run_id=f"{experiment}/{tier}/{n:03d}",
        experiment_id=experiment,
        tier=tier,
        passed=passed,
        completed_at=f"2026-01-05T10:{n:02d}:00Z",
    )


def untimed(table: dict[bytes, bytes]) -> dict[bytes, Any]:
    """A table's states without the processing time they were touched at."""
    return {k: {f: v for f, v in json.loads(raw).items() if f != "at"} for k, raw in table.items()}


def stage_with(sends: Sends | None = None, **overrides: Any) -> tuple[WindowsStage, Sends, Table]:
    config, default_sends, exporter, _ = wiring(**overrides)
    sends = sends or default_sends
    table = Table(sends)
    stage = WindowsStage(table, CHANGELOG, config, Outputs(sends, config, exporter), exporter)
    return stage, sends, table


async def test_a_batch_writes_each_key_once_and_publishes_its_last_aggregate() -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    batch = forwarded(config, run(1), run(2), run(3, tier="T2"), run(2))  # the last: a duplicate
    await stage.handle(batch)

    assert [key for key, _ in table.writes] == [b"exp/T1", b"exp/T2"]
    aggregates = sends.to(config.topics.aggregates)
    assert [(a["tier"], a["runs"]) for a in aggregates] == [("T1", 2), ("T2", 1)]
    # Aggregates go to the partition of their experiment, keyed by tier.
    assert {p for t, _, _, p in sends.sent if t == config.topics.aggregates} == {
        partition_for("exp", config.partitions)
    }
    # The table holds exactly what replay computes for the same runs.
    lines = [encode(e) for e in (run(1), run(2), run(3, tier="T2"), run(2))]
    expected = {f"{a.experiment_id}/{a.tier}": a for a in replay_lines(lines, config).tiers}
    for key, raw in table.items():
        experiment_and_tier = cast(tuple[str, str], key.decode().split("/"))
        state = TierState.from_json(*experiment_and_tier, config.window_size, raw)
        assert state.aggregate(config) == expected[key.decode()]
    m = samples(stage.exporter)
    assert m[("evalstream_runs_accepted_total", ())] == 3  # 2 to T1, 1 to T2
    assert m[("evalstream_runs_ignored_total", (("reason", "duplicate"),))] == 1


async def test_grade_changes_are_acknowledged_before_the_state_that_records_them() -> None:
    sends = Sends(auto_ack=False)
    stage, _, table = stage_with(sends, window_size=2)
    config = stage.settings
    # full window: grade A, no change (its runs' suite evidence waits for the broker too)
    await sends.acked_until(asyncio.ensure_future(stage.handle(forwarded(config, run(1), run(2)))))
    assert not sends.to(config.topics.grade_changes)
    sends.ack_pending()
    table.writes.clear()

    async def drop_then_ack() -> None:
        task = asyncio.create_task(
            stage.handle(forwarded(config, run(3, passed=False), run(4, passed=False)))
        )
        for _ in range(200):  # let the stage run until it waits for the broker
            await asyncio.sleep(0)
        assert sends.to(config.topics.grade_changes), "the drop was sent"
        assert not table.writes, "state written before its grade change was acknowledged"
        assert not task.done()
        sends.ack_pending()
        await task

    await drop_then_ack()
    changes = sends.to(config.topics.grade_changes)
    assert [(c["previous_grade"], c["grade"]) for c in changes] == [("B", "D"), ("D", "F")]
    assert table.writes
    assert all(pending == 0 for _, pending in table.writes)


def gauged(stage: WindowsStage) -> set[tuple[str, str]]:
    """The tiers with gauges on this stage's exporter."""
    return {
        (dict(labels)["experiment"], dict(labels)["tier"])
        for (name, labels) in samples(stage.exporter)
        if name == "evalstream_tier_grade_points"
    }


async def test_a_restarted_stage_restores_its_owned_keys_gauges_and_publishes_nothing() -> None:
    stage, _, table = stage_with()
    config = stage.settings
    keys = [(f"e{i}", f"T{i % 7}") for i in range(12)]
    await stage.handle(forwarded(config, *(run(1, tier=t, experiment=e) for e, t in keys)))
    again, again_sends = restarted(stage, table)
    owned = {0, 2}
    count = await recover(again, owned)
    expected = {(e, t) for e, t in keys if partition_for(e, 4) in owned}
    assert again_sends.sent == []
    assert gauged(again) == expected
    assert count == len(expected)
    assert 0 < count < len(keys)
    assert await recover(again, owned) == 0  # a rebalance that keeps them restores nothing


async def test_recovery_gives_the_event_loop_back_between_keys() -> None:
    """A recovery of 100,000 tiers works for seconds: probes and scrapes must be answered in
    between (here every key, with a slice of 0 s)."""
    stage, _, _ = stage_with()
    config = stage.settings
    await stage.handle(forwarded(config, *(run(1, experiment=f"e{i}") for i in range(40))))
    stage.recovery_slice_s = 0.0
    assert await turns_during(stage.restore_gauges({0, 1, 2, 3}, stage.generation)) >= 40
    stage.recovery_slice_s = 3600.0
    assert await turns_during(stage.restore_gauges({0, 1, 2, 3}, stage.generation)) == 0


async def test_a_restoration_revoked_midway_restores_nothing_more() -> None:
    """A rebalance during a restoration's pauses stops it; the recovery that follows drops the
    gauges of the lost partitions and restores the rest."""
    stage, _, table = stage_with()
    config = stage.settings
    experiments = [f"e{i}" for i in range(40)]
    await stage.handle(forwarded(config, *(run(1, experiment=e) for e in experiments)))
    again, _ = restarted(stage, table)
    again.recovery_slice_s = 0.0
    newly = await again.on_recover({0, 1, 2, 3})
    restoring = asyncio.create_task(again.restore_gauges(newly, again.generation))
    while not gauged(again):
        await asyncio.sleep(0)
    again.on_revoked({0, 1, 2, 3})
    with pytest.raises(Revoked):
        await restoring
    assert 0 < len(gauged(again)) < len(experiments)
    await recover(again, {2, 3})
    lost = {e for e in experiments if partition_for(e, config.partitions) in {0, 1}}
    assert lost
    assert {e for e, _ in gauged(again)} == set(experiments) - lost


async def test_a_recovery_of_an_assignment_revoked_before_it_began_publishes_nothing() -> None:
    """The hook read its partitions, then waited (for the lock) while they were revoked."""
    stage, sends, _ = stage_with()
    await stage.handle(forwarded(stage.settings, run(1)))
    sends.sent.clear()
    assigned = stage.generation
    stage.on_revoked({0, 1, 2, 3})
    with pytest.raises(Revoked):
        await stage.on_recover({0, 1, 2, 3}, assigned)
    assert sends.sent == []


async def test_recovery_quarantines_a_state_that_cannot_load_and_goes_on() -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    await stage.handle(forwarded(config, run(1)))
    table[b"exp/T9"] = b'{"v":1,"window":"no","grade":null}'
    sends.sent.clear()
    await recover(stage, {0, 1, 2, 3})
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "state_error"
    assert letter["origin"]["topic"] == CHANGELOG
    assert letter["origin"]["key"] == "exp/T9"
    assert b"exp/T9" not in table
    assert sends.tombstones(config.topics.aggregates) == [b"exp/T9"]  # its aggregate withdrawn
    assert sends.to(config.topics.aggregates) == []  # nothing re-published
    m = samples(stage.exporter)
    assert m[("evalstream_state_quarantined_total", (("table", "tier-windows"),))] == 1


async def test_a_quarantined_tier_loses_its_gauges() -> None:
    stage, _, table = stage_with()
    config = stage.settings
    await stage.handle(forwarded(config, run(1, tier="T3")))
    runs = ("evalstream_tier_window_runs", (("experiment", "exp"), ("tier", "T3")))
    assert samples(stage.exporter)[runs] == 1
    table[b"exp/T3"] = b'{"v":1,"window":"no","grade":null}'
    again, _ = restarted(stage, table)
    again.exporter = stage.exporter
    await recover(again, {0, 1, 2, 3})
    assert runs not in samples(stage.exporter)


async def test_a_rebalance_drops_the_gauges_of_lost_partitions_only() -> None:
    stage, _, _ = stage_with()
    config = stage.settings
    keys = [(f"e{i}", f"T{i % 7}") for i in range(12)]
    await recover(stage, {0, 1, 2, 3})
    await stage.handle(forwarded(config, *(run(1, tier=t, experiment=e) for e, t in keys)))
    lost = {1, 3}
    stage.on_revoked({0, 1, 2, 3})  # the eager protocol revokes all, then assigns
    assert not stage.cache
    assert gauged(stage) == set(keys)  # kept until the recovery says which are gone
    await recover(stage, {0, 2})
    left = gauged(stage)
    assert left == {(e, t) for e, t in keys if partition_for(e, 4) not in lost}
    assert left
    assert left != set(keys)
    assert not stage.cache


async def test_a_failed_batch_writes_no_state_and_drops_the_cache() -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    await stage.handle(forwarded(config, run(1)))
    assert stage.cache
    before = dict(table)
    sends.fail_on = config.topics.aggregates
    with pytest.raises(ConnectionError):
        await stage.handle(forwarded(config, run(2)))
    assert not stage.cache  # it may be ahead of the table: the next batch reads the table
    assert dict(table) == before  # its output failed: its state is not written
    assert table.get(b"exp/T1") == before[b"exp/T1"]  # nor held
    sends.fail_on = None
    await stage.handle(forwarded(config, run(2)))  # redelivered: counted once
    m = samples(stage.exporter)
    assert m[("evalstream_runs_ignored_total", (("reason", "duplicate"),))] == 0
    assert len(json.loads(table[b"exp/T1"])["window"]) == 2


async def test_a_bad_record_is_dead_lettered_with_the_bytes_the_stage_received() -> None:
    stage, sends, _ = stage_with()
    config = stage.settings
    batch = forwarded(config, run(1)) + records(config.topics.runs_by_tier, [b'{"tier": 1}'])
    await stage.handle(batch)
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "processing_error"
    assert letter["detail"]["stage"] == "window"
    assert letter["payload"] == '{"tier": 1}'
    assert sends.keys(config.topics.aggregates) == [b"exp/T1"]
    assert json.loads(cast(bytes, sends.sent[-1][2]))["run_ids"] == ["exp/T1/001"]


async def test_a_refused_record_fails_the_batch_before_its_state_is_written() -> None:
    """The broker refusing a record after `send` returned (its acknowledgement fails) must fail
    the batch before it counts as done, and before the state that records it is written."""
    sends = Sends(auto_ack=False)
    stage, _, table = stage_with(sends)
    config = stage.settings
    task = asyncio.ensure_future(stage.handle(forwarded(config, run(1))))
    while not sends.to(config.topics.aggregates):
        await asyncio.sleep(0)
    for (topic, *_), ack in zip(sends.sent, sends.acks, strict=True):
        if topic == config.topics.aggregates:
            ack.set_exception(ConnectionError("MessageSizeTooLarge"))
        else:
            ack.set_result(None)
    with pytest.raises(ConnectionError):
        await task
    assert not table
    assert not table.writes
    assert not stage.outputs.unconfirmed


async def test_run_age_and_accepted_count_only_the_runs_added() -> None:
    stage, _, _ = stage_with()
    config = stage.settings
    await stage.handle(forwarded(config, run(1), run(1), run(2)))  # one duplicate
    m = samples(stage.exporter)
    assert m[("evalstream_run_age_seconds_count", ())] == 2
    assert m[("evalstream_runs_accepted_total", ())] == 2


async def test_a_bundle_of_many_runs_is_folded_like_the_same_runs_one_by_one() -> None:
    one_by_one, sends_a, _ = stage_with()
    bundled, sends_b, _ = stage_with()
    config = one_by_one.settings
    events = [run(n, tier=f"T{n % 3}") for n in range(1, 25)]
    await one_by_one.handle(forwarded(config, *events))
    bundle = bundle_runs([metrics_json(config, e) for e in events], 1 << 20)
    handled = await bundled.handle(records(config.topics.runs_by_tier, bundle))
    assert handled == len(events)  # the runs, for the per-event processing histogram
    assert untimed(cast(Table, bundled.table)) == untimed(cast(Table, one_by_one.table))
    assert sends_b.to(config.topics.aggregates)[-3:] == sends_a.to(config.topics.aggregates)[-3:]


async def test_a_message_that_is_no_bundle_is_its_dead_letter() -> None:
    """Only bundles travel on the re-keyed topic: no format before them is read
    (docs/architecture.md, 'Stored formats')."""
    stage, sends, _ = stage_with()
    config = stage.settings
    bare = records(config.topics.runs_by_tier, [metrics_json(config, run(1))])
    await stage.handle(bare)
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "processing_error"
    assert "not a bundle of runs" in json.dumps(letter)
    assert sends.to(config.topics.aggregates) == []


async def test_a_bad_run_inside_a_bundle_is_its_own_dead_letter() -> None:
    stage, sends, _ = stage_with()
    config = stage.settings
    good = [metrics_json(config, run(n)) for n in (1, 2)]
    bundle = bundle_runs([good[0], b'{"tier": 1}', good[1]], 1 << 20)
    await stage.handle(records(config.topics.runs_by_tier, bundle, key=b"partition-0"))
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "processing_error"
    assert json.loads(letter["payload"]) == {"tier": 1}
    assert letter["origin"]["key"] == "partition-0"
    assert json.loads(cast(bytes, sends.sent[-1][2]))["run_ids"] == ["exp/T1/001", "exp/T1/002"]


@pytest.mark.parametrize(
    "value",
    [
        b'{"v": 1, "runs": 7}',
        b'{"v": 2, "runs": []}',  # a version this worker does not know
        b'{"runs": []}',
        b'{"v": 1, "runs": [' + b",".join([b"0"] * 10_001) + b"]}",  # not one letter per item
        b"[1, 2]",
        b"\xff",
    ],
)
async def test_a_message_that_is_no_bundle_is_one_dead_letter(value: bytes) -> None:
    stage, sends, _ = stage_with()
    config = stage.settings
    await stage.handle(records(config.topics.runs_by_tier, [value]))
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "processing_error"


def now_us() -> int:
    return to_epoch_us(datetime.now(UTC))


DAY_US = 86_400 * 1_000_000


async def test_an_idle_experiment_retires_with_tombstones_acknowledged_before_the_deletes() -> None:
    sends = Sends(auto_ack=False)
    stage, _, table = stage_with(sends, experiment_idle_ttl_s=86_400)
    config = stage.settings

    async def scenario() -> list[str]:
        handling = asyncio.ensure_future(
            stage.handle(
                forwarded(config, run(1, tier="T0"), run(2, tier="T3"), run(1, experiment="other"))
            )
        )
        await sends.acked_until(handling)
        sends.sent.clear()
        assert stage.idle.last.keys() == {"exp", "other"}
        retiring = asyncio.ensure_future(stage.retire_idle(now_us() + DAY_US + 1_000_000))
        await asyncio.sleep(0.01)
        # the tombstones wait for the broker: nothing is deleted yet
        assert not table.deletes
        result: list[str] = await sends.acked_until(retiring)
        return result

    retired = await scenario()
    assert retired == ["exp", "other"]
    tombstones = [
        (key, value, partition)
        for topic, key, value, partition in sends.sent
        if topic == config.topics.aggregates
    ]
    assert sorted(tombstones) == sorted(
        [
            (b"exp/T0", None, partition_for("exp", 4)),
            (b"exp/T3", None, partition_for("exp", 4)),
            (b"other/T1", None, partition_for("other", 4)),
        ]
    )
    assert sorted(k for k, _ in table.deletes) == [b"exp/T0", b"exp/T3", b"other/T1"]
    assert all(pending == 0 for _, pending in table.deletes)
    assert not table
    assert not stage.cache
    m = samples(stage.exporter)
    assert not [name for name, _ in m if name.startswith("evalstream_tier_")]
    assert m[("evalstream_experiments_retired_total", ())] == 2
    assert m[("evalstream_experiments", ())] == 0


async def test_an_experiment_with_one_active_tier_stays_and_a_retired_one_starts_fresh() -> None:
    stage, sends, table = stage_with(experiment_idle_ttl_s=86_400)
    config = stage.settings
    await stage.handle(forwarded(config, *(run(n, tier="T0") for n in range(1, 11))))
    stored = json.loads(table[b"exp/T0"])
    stored["at"] -= DAY_US // 2  # T0 last ran half a day ago…
    table[b"exp/T0"] = json.dumps(stored).encode()
    stage, sends = restarted(stage, table, experiment_idle_ttl_s=86_400)
    await recover(stage, {0, 1, 2, 3})
    await stage.handle(forwarded(config, run(1, tier="T5")))  # …T5 runs now
    assert await stage.retire_idle(now_us() + DAY_US // 2 + 60_000_000) == []
    assert b"exp/T0" in table

    assert await stage.retire_idle(now_us() + DAY_US + 60_000_000) == ["exp"]
    assert not table
    sends.sent.clear()
    await stage.handle(forwarded(config, run(11, tier="T0")))
    [aggregate] = sends.to(config.topics.aggregates)
    assert aggregate["runs"] == 1  # a fresh window


async def test_recovery_tracks_the_stored_touch_times_and_a_ttl_of_zero_retires_nothing() -> None:
    stage, _, table = stage_with(experiment_idle_ttl_s=0)
    config = stage.settings
    await stage.handle(forwarded(config, run(1)))
    assert await stage.retire_idle(now_us() + 10_000 * DAY_US) == []
    assert b"exp/T1" in table

    legacy, _, legacy_table = stage_with(experiment_idle_ttl_s=60)
    stored = {k: v for k, v in json.loads(table[b"exp/T1"]).items() if k != "at"}
    legacy_table[b"exp/T1"] = json.dumps(stored).encode()  # stored before touch times were kept
    await recover(legacy, {0, 1, 2, 3})
    assert await legacy.retire_idle(now_us()) == []  # counts as touched at recovery
    assert await legacy.retire_idle(now_us() + 61_000_000) == ["exp"]


async def test_a_state_with_a_bad_touch_time_is_quarantined() -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    await stage.handle(forwarded(config, run(1)))
    stored = json.loads(table[b"exp/T1"])
    stored["at"] = "yesterday"
    table[b"exp/T1"] = json.dumps(stored).encode()
    sends.sent.clear()
    await recover(stage, {0, 1, 2, 3})
    [letter] = sends.to(config.topics.dead_letter)
    assert "touched" in letter["detail"]["error"]


async def test_the_state_cache_keeps_the_most_recently_used_keys_only() -> None:
    stage, sends, _ = stage_with(state_cache_keys=3)
    config = stage.settings
    await stage.handle(forwarded(config, *(run(1, tier=f"T{t}") for t in range(5))))
    assert list(stage.cache) == [b"exp/T2", b"exp/T3", b"exp/T4"]
    assert stage.cached("exp/T2") is stage.cache[b"exp/T2"]  # a hit moves it to the end
    assert list(stage.cache) == [b"exp/T3", b"exp/T4", b"exp/T2"]
    sends.sent.clear()  # an evicted key is read back from the table, with nothing lost
    await stage.handle(forwarded(config, run(2, tier="T0")))
    [aggregate] = sends.to(config.topics.aggregates)
    assert aggregate["runs"] == 2


@pytest.mark.parametrize("restored", [True, False], ids=["restored", "gauges not restored yet"])
async def test_a_run_for_an_experiment_idle_past_the_ttl_starts_it_fresh_before_the_timer(
    restored: bool,
) -> None:
    """Replay's rule, exactly: the batch retires the idle experiment before folding its run,
    also before a restarted worker has restored that experiment's gauges."""
    stage, sends, table = stage_with(experiment_idle_ttl_s=86_400)
    config = stage.settings
    await stage.handle(forwarded(config, *(run(n, tier="T0") for n in range(1, 11))))
    stored = json.loads(table[b"exp/T0"])
    stored["at"] -= 2 * DAY_US
    table[b"exp/T0"] = json.dumps(stored).encode()
    stage, sends = restarted(stage, table, experiment_idle_ttl_s=86_400)
    stage.lagging = lambda: False
    if restored:
        await recover(stage, {0, 1, 2, 3})
    else:
        await stage.on_recover({0, 1, 2, 3})
    sends.sent.clear()
    await stage.handle(forwarded(config, run(11, tier="T0")))
    assert sends.tombstones(config.topics.aggregates) == [b"exp/T0"]
    [aggregate] = sends.to(config.topics.aggregates)
    assert aggregate["run_ids"] == ["exp/T0/011"]


async def test_nothing_retires_while_the_worker_is_behind_its_input() -> None:
    stage, _, table = stage_with(experiment_idle_ttl_s=60)
    config = stage.settings
    await stage.handle(forwarded(config, run(1)))
    stage.lagging = lambda: True
    assert await stage.retire_idle(now_us() + DAY_US) == []
    await stage.handle(forwarded(config, run(2)))  # a backlog's run: the same window
    assert len(json.loads(table[b"exp/T1"])["window"]) == 2
    stage.lagging = lambda: False
    assert await stage.retire_idle(now_us() + DAY_US) == ["exp"]


async def test_a_rebalance_waits_for_a_retirement_under_way_to_write_its_deletes() -> None:
    """Its tombstones are on their way: the revocation waits until the states they retire are
    deleted, so that whoever owns the partitions next reads the deletes from the changelog (no
    recovery re-publishes, so a state whose aggregate was withdrawn must not stay)."""
    sends = Sends(auto_ack=False)
    stage, _, table = stage_with(sends, experiment_idle_ttl_s=60)
    config = stage.settings

    async def scenario() -> list[str]:
        await sends.acked_until(
            asyncio.ensure_future(stage.handle(forwarded(config, run(1), run(2, tier="T3"))))
        )
        sends.sent.clear()
        retiring = asyncio.ensure_future(stage.retire_idle(now_us() + DAY_US))
        await asyncio.sleep(0.01)  # its tombstones wait for the broker
        revoking = asyncio.ensure_future(stage.revoke({0, 1, 2, 3}))
        await asyncio.sleep(0.01)
        assert not revoking.done()
        retired: list[str] = await sends.acked_until(retiring)
        await revoking
        return retired

    assert await scenario() == ["exp"]
    assert set(table) == set()
    assert set(sends.tombstones(config.topics.aggregates)) == {b"exp/T1", b"exp/T3"}


def restarted(stage: WindowsStage, table: Table, **overrides: Any) -> tuple[WindowsStage, Sends]:
    """A new worker's stage over the same table (`overrides`: its settings differ)."""
    config, sends, exporter, outputs = wiring(**overrides)
    return WindowsStage(table, CHANGELOG, config, outputs, exporter), sends


def published(sends: Sends, config: Settings) -> dict[bytes | None, bytes | None]:
    return {k: v for t, k, v, _ in sends.sent if t == config.topics.aggregates}


def tiers_aggregated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tier of every state aggregated from now on, in order."""
    derived: list[str] = []
    aggregate = TierState.aggregate

    def counted(state: TierState, config: Any) -> Any:
        derived.append(state.tier)
        return aggregate(state, config)

    monkeypatch.setattr(TierState, "aggregate", counted)
    return derived


async def test_a_restart_restores_the_gauges_from_the_stored_aggregates_as_they_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    keys = [(f"e{i}", f"T{i % 7}") for i in range(9)]
    await stage.handle(forwarded(config, *(run(1, tier=t, experiment=e) for e, t in keys)))
    await stage.handle(forwarded(config, run(2, tier="T1", experiment="e1")))
    before = published(sends, config)

    def not_again(*_: Any, **__: Any) -> None:
        raise AssertionError("a stored aggregate was derived again")

    monkeypatch.setattr(TierState, "aggregate", not_again)
    monkeypatch.setattr(TierState, "from_json", not_again)
    again, again_sends = restarted(stage, table)
    assert await recover(again, {0, 1, 2, 3}) == len(keys)
    assert again_sends.sent == []  # nothing derived, nothing re-published
    owned = list(again.exporter.aggregates.tiers)
    restored = {tier_key(*k).encode(): again.aggregate_of(*k) for k in owned}
    assert {k: a.model_dump_json().encode() for k, a in restored.items() if a} == before
    fresh = AggregateCollector()  # the gauges of the latest of each key, byte for byte
    for raw in before.values():
        assert raw is not None
        fresh.set_tier(TierAggregate.model_validate_json(raw))
    assert again.exporter.aggregates.tiers == fresh.tiers
    gauges = samples(again.exporter)
    assert gauges[("evalstream_tier_window_runs", (("experiment", "e1"), ("tier", "T1")))] == 2


async def test_other_settings_derive_every_aggregate_again(monkeypatch: pytest.MonkeyPatch) -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    await stage.handle(forwarded(config, run(1), run(2, tier="T2", passed=False)))
    stricter = {"grade_thresholds": {"A": 0.99, "B": 0.98, "C": 0.97, "D": 0.96}}
    again, again_sends = restarted(stage, table, **stricter)
    derived = tiers_aggregated(monkeypatch)
    await recover(again, {0, 1, 2, 3})
    assert sorted(derived) == ["T1", "T2"]
    expected = {
        a.tier: a.grade
        for a in replay_lines(
            [encode(run(1)), encode(run(2, tier="T2", passed=False))], again.settings
        ).tiers
    }
    assert {a["tier"]: a["grade"] for a in again_sends.to(config.topics.aggregates)} == expected
    assert expected != {a["tier"]: a["grade"] for a in sends.to(config.topics.aggregates)}


async def test_a_stored_aggregate_that_does_not_read_is_derived_again_not_quarantined() -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    await stage.handle(forwarded(config, run(1), run(1, experiment="other")))
    before = published(sends, config)
    broken = json.loads(table[b"exp/T1"])
    broken["agg"] = broken["agg"][:-10]  # cut short
    table[b"exp/T1"] = json.dumps(broken).encode()
    elsewhere = json.loads(table[b"other/T1"])
    elsewhere["agg"] = (before[b"exp/T1"] or b"").decode()  # another tier's aggregate, whole
    table[b"other/T1"] = json.dumps(elsewhere).encode()
    again, again_sends = restarted(stage, table)
    await recover(again, {0, 1, 2, 3})
    assert published(again_sends, config) == before  # derived again: the same bytes
    assert not again_sends.to(config.topics.dead_letter)


async def test_a_stored_aggregate_is_trusted_only_in_a_sound_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stage, sends, table = stage_with()
    config = stage.settings
    tiers = ["T0", "T1", "T2", "T3"]
    await stage.handle(forwarded(config, *(run(1, tier=t) for t in tiers)))
    before = published(sends, config)
    records = {t: json.loads(table[f"exp/{t}".encode()]) for t in tiers}
    del records["T0"]["at"]  # no touch time: counts as touched now, the aggregate stands
    records["T1"]["agg"] = json.dumps(json.loads(records["T1"]["agg"]), indent=1)  # not as sent
    records["T2"]["agg"] = records["T2"]["agg"].replace('"grade":"', '"grade":"A","x":"', 1)
    records["T3"]["v"] = 7  # a state of no version this code reads, its aggregate intact
    for t, record in records.items():
        table[f"exp/{t}".encode()] = json.dumps(record).encode()
    derived = tiers_aggregated(monkeypatch)
    again, again_sends = restarted(stage, table)
    await recover(again, {0, 1, 2, 3})
    assert sorted(derived) == ["T1", "T2"]  # derived again, and published as before
    republished = published(again_sends, config)
    assert {k: v for k, v in republished.items() if v is not None} == {
        k: before[k] for k in (b"exp/T1", b"exp/T2")
    }
    [letter] = again_sends.to(config.topics.dead_letter)  # T3 quarantined, as before
    assert letter["origin"]["key"] == "exp/T3"
    assert again_sends.tombstones(config.topics.aggregates) == [b"exp/T3"]
    assert await again.retire_idle(now_us()) == []  # T0 counts as touched at recovery


async def test_the_query_api_reads_a_tier_as_published_whatever_its_record_holds() -> None:
    """`aggregate_of`: the aggregate stored with the state, byte for byte; one made again from
    a state stored alone (too large to carry both); None for no record or one that does not
    load."""
    stage, sends, table = stage_with()
    config = stage.settings
    await stage.handle(forwarded(config, run(1), run(2), run(1, tier="T2")))
    before = published(sends, config)

    def read(tier: str) -> bytes | None:
        aggregate = stage.aggregate_of("exp", tier)
        return None if aggregate is None else aggregate.model_dump_json().encode()

    assert read("T1") == before[b"exp/T1"]
    alone = json.loads(table[b"exp/T2"])
    del alone["agg"], alone["made"]
    table[b"exp/T2"] = json.dumps(alone).encode()
    assert read("T2") == before[b"exp/T2"]
    table[b"exp/T1"] = b"{not json"
    assert read("T1") is None
    assert read("T9") is None


def test_a_state_stored_with_its_aggregate_fits_the_broker_or_goes_alone() -> None:
    stage, _, _ = stage_with()
    state = TierState.empty("exp", "T1", stage.settings.window_size)
    limit = stage.settings.broker_max_message_bytes - MESSAGE_OVERHEAD_BYTES
    aggregate = b'"' + b"x" * (limit - len(state.to_json()) - 40) + b'"'
    assert stage.stored(state, aggregate) == state.to_json()
    quotes = b'"' + b'\\"' * ((limit - len(state.to_json()) - 100) // 2) + b'"'
    assert len(state.to_json()) + len(quotes) < limit  # fits before escaping, not after
    assert stage.stored(state, quotes) == state.to_json()
    small = stage.stored(state, b"{}")
    assert len(small) > len(state.to_json())
    assert json.loads(small)["agg"] == "{}"


async def test_retirement_judges_an_experiment_by_all_its_tiers_while_gauges_are_restored() -> None:
    """A restarted worker restores its keys one at a time after it is ready: an experiment
    whose old tier came back before its recent one must not look idle meanwhile."""
    stage, _, table = stage_with(experiment_idle_ttl_s=86_400)
    config = stage.settings
    await stage.handle(forwarded(config, run(1, tier="T0"), run(1, tier="T5")))
    stored = json.loads(table[b"exp/T0"])
    stored["at"] -= 2 * DAY_US  # T0 last ran two days ago, T5 now
    table[b"exp/T0"] = json.dumps(stored).encode()
    again, sends = restarted(stage, table, experiment_idle_ttl_s=86_400)
    again.lagging = lambda: False
    newly = await again.on_recover({0, 1, 2, 3})
    await again.restore_unit(b"exp/T0", Pauses(0.0, lambda: True))  # T0 back, T5 not yet
    assert await again.retire_idle(now_us()) == []
    await again.restore_gauges(newly, again.generation)
    assert await again.retire_idle(now_us()) == []
    assert await again.retire_idle(now_us() + 2 * DAY_US) == ["exp"]
    assert set(sends.tombstones(config.topics.aggregates)) == {b"exp/T0", b"exp/T5"}


async def test_a_partition_that_left_and_came_back_has_its_gauges_made_again() -> None:
    """Rebalanced away and back (a recovery in between cut short, so this worker never saw it
    leave): another worker changed its keys meanwhile, and what this one showed is stale."""
    stage, _, table = stage_with()
    config = stage.settings
    keys = [(f"e{i}", "T1") for i in range(12)]
    await recover(stage, {0, 1, 2, 3})
    await stage.handle(forwarded(config, *(run(1, experiment=e) for e, _ in keys)))
    gone = next(e for e, _ in keys if partition_for(e, 4) == 1)
    del table[f"{gone}/T1".encode()]  # retired by the other worker
    newly = await stage.on_recover({0, 1, 2, 3}, moved={1})
    assert newly == {1}
    assert not {e for e, _ in gauged(stage) if partition_for(e, 4) == 1}
    await stage.restore_gauges(newly, stage.generation)
    assert gauged(stage) == set(keys) - {(gone, "T1")}
