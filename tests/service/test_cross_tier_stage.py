"""The cross-tier stage driven in-process: a dict for its table, a list for its sends; alone, fed
the aggregates the windows stage publishes, and inside the windows hop as the worker runs it."""

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from schemas import ReplayReport
from stream_app.core.replay import replay_lines
from stream_app.core.window import to_epoch_us
from stream_app.metrics.cross_tier import TierFigures
from stream_app.service.outputs import Outputs, Record
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import Settings
from stream_app.service.stages.cross_tier import CrossTierStage, Published
from stream_app.service.stages.windows import WindowsStage
from tests.helpers import SAMPLE_FILE
from tests.stage_doubles import Sends, Table, forwarded, recover, samples, wiring

CHANGELOG = "evalstream-experiment-tiers-changelog"
SAMPLE = SAMPLE_FILE.read_bytes().splitlines()


def make_stage() -> tuple[CrossTierStage, Table, Sends]:
    config, sends, exporter, _ = wiring()
    table = Table(sends)
    stage = CrossTierStage(table, CHANGELOG, config, Outputs(sends, config, exporter), exporter)
    return stage, table, sends


async def fold(stage: CrossTierStage, published: Sequence[Published]) -> None:
    """What the windows hop does at the end of a batch: fold what it published, confirm."""
    async with stage.lock:
        await stage.fold(published)
        await stage.confirm()


async def fed_the_sample(stage: CrossTierStage) -> ReplayReport:
    """The stage after one batch of the sample's tier aggregates; replay's report of them."""
    report = replay_lines(SAMPLE, stage.settings)
    await fold(stage, [Published.aggregate(a, a.model_dump_json().encode()) for a in report.tiers])
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


async def test_the_query_api_reads_each_report_as_published() -> None:
    """`report_of`: every experiment's report made again from its stored state equals the one
    published; None for an experiment with none, or a state that does not load."""
    stage, table, sends = make_stage()
    report = await fed_the_sample(stage)
    sent = {r["experiment_id"]: r for r in sends.to(stage.settings.topics.cross_tier)}
    for cross in report.cross_tier:
        again = stage.report_of(cross.experiment_id)
        assert again is not None
        assert again.model_dump(mode="json") == sent[cross.experiment_id]
    assert stage.report_of("nope") is None
    table[report.cross_tier[0].experiment_id.encode()] = b"{not json"
    assert stage.report_of(report.cross_tier[0].experiment_id) is None


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
    await fold(stage, [Published.aggregate(aggregate, aggregate.model_dump_json().encode())])
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

    def tombstone(tier: str) -> Published:
        return Published.tombstone(experiment, tier)

    await fold(stage, [tombstone(tiers[0])])  # one tier retired: the report follows
    [partial] = sends.to(config.topics.cross_tier)
    assert sorted(partial["tiers"]) == sorted(tiers[1:])

    sends.sent.clear()
    await fold(stage, [tombstone(t) for t in tiers[1:]])
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
    await fold(stage, [tombstone(tiers[0])])
    assert sends.sent == []


async def test_an_aggregate_the_report_cannot_take_is_a_dead_letter_of_its_own() -> None:
    stage, table, sends = make_stage()
    config = stage.settings
    good = replay_lines(SAMPLE[:1], config).tiers[0]
    bad = Published("broken", "no-tier", TierFigures(0.5, 0.5, 0.5, None, 1, 1, 0.5), b"{}")
    await fold(stage, [bad, Published.aggregate(good, good.model_dump_json().encode())])
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "processing_error"
    assert letter["origin"]["topic"] == config.topics.aggregates
    assert letter["origin"]["key"] == "broken/no-tier"
    assert letter["origin"]["offset"] is None
    assert set(table) == {good.experiment_id.encode()}


async def test_a_state_stored_before_cumulative_counts_loads_and_fills_in() -> None:
    """An experiment state of four medians per tier (before the counts were kept) loads without
    quarantine; the tiers have no differences until their next aggregates bring counts."""
    stage, table, sends = make_stage()
    config = stage.settings
    report = replay_lines(SAMPLE, config)
    t0, t1 = (a for a in report.tiers if a.experiment_id == "test-001" and a.tier in ("T0", "T1"))
    medians = [t0.composite_score.median, t0.pass_rate.median, t0.impl_rate.median, 0.1]
    table[b"test-001"] = json.dumps({"T0": medians, "T1": medians}).encode()
    await fold(stage, [Published.aggregate(t1, t1.model_dump_json().encode())])
    assert not sends.to(config.topics.dead_letter)
    [sent] = sends.to(config.topics.cross_tier)
    assert sent["pass_rate_difference"] == {}  # the baseline has no counts yet
    await fold(stage, [Published.aggregate(t0, t0.model_dump_json().encode())])
    latest = sends.to(config.topics.cross_tier)[-1]
    assert set(latest["pass_rate_difference"]) == {"T1"}


class Ordered(Table):
    """A table that notes its name in a shared list each time it writes."""

    def __init__(self, sends: Sends, name: str, order: list[str]) -> None:
        super().__init__(sends)
        self.name, self.order = name, order

    async def write(self) -> None:
        if self.held:
            self.order.append(self.name)
        await super().write()


def windows_hop(**overrides: object) -> tuple[WindowsStage, Ordered, Ordered, Sends, list[str]]:
    """The windows stage with the cross-tier stage inside it, as `topology.build_stages` wires
    them: one outputs, one lock; (windows, its table, the experiments' table, sends, the order
    the tables wrote in)."""
    config, sends, exporter, outputs = wiring(**overrides)
    order: list[str] = []
    experiments = Ordered(sends, "experiments", order)
    reports = CrossTierStage(experiments, CHANGELOG, config, outputs, exporter)
    tiers = Ordered(sends, "tiers", order)
    windows = WindowsStage(tiers, "tier-windows-changelog", config, outputs, exporter)
    windows.feed(reports)
    assert windows.lock is reports.lock
    return windows, tiers, experiments, sends, order


def sample_runs(config: Settings) -> list[Record]:
    """The sample's runs as the validate stage forwards them."""
    return forwarded(config, *(json.loads(line) for line in SAMPLE))


async def test_the_windows_hop_reports_each_touched_experiment_in_the_batch_that_touched_it() -> (
    None
):
    windows, tiers, experiments, sends, order = windows_hop()
    config = windows.settings
    await windows.handle(sample_runs(config))
    expected = replay_lines(SAMPLE, config)
    reports = {r["experiment_id"]: r for r in sends.to(config.topics.cross_tier)}
    assert reports == {r.experiment_id: r.model_dump(mode="json") for r in expected.cross_tier}
    assert len(sends.to(config.topics.cross_tier)) == len(expected.cross_tier)  # once each
    # every output acknowledged before any state is written; the experiments' states first
    assert order == ["experiments", "tiers"]
    assert all(pending == 0 for _, pending in experiments.writes + tiers.writes)
    assert {k.decode() for k in experiments} == {r.experiment_id for r in expected.cross_tier}


async def test_a_batch_of_more_tiers_than_batch_max_keys_is_confirmed_a_part_at_a_time() -> None:
    """Three experiments of seven tiers, at most 10 tiers a part: three parts, each one's
    outputs acknowledged and its states written before the next part sends anything; every
    experiment reported once, and the tables as replay has them."""
    windows, tiers, experiments, sends, order = windows_hop(batch_max_keys=10)
    config = windows.settings
    aggregated: list[set[str]] = []  # the experiments with aggregates sent, at each write
    write = tiers.write

    async def noting() -> None:
        aggregated.append({a["experiment_id"] for a in sends.to(config.topics.aggregates)})
        await write()

    writers = windows.outputs.state_writers
    writers[writers.index(write)] = noting
    await windows.handle(sample_runs(config))
    assert order == ["experiments", "tiers"] * 3
    assert [len(a) for a in aggregated] == [1, 2, 3]  # a part's tiers are one experiment's
    assert all(pending == 0 for _, pending in experiments.writes + tiers.writes)
    expected = replay_lines(SAMPLE, config)
    reports = {r["experiment_id"]: r for r in sends.to(config.topics.cross_tier)}
    assert reports == {r.experiment_id: r.model_dump(mode="json") for r in expected.cross_tier}
    assert len(sends.to(config.topics.cross_tier)) == len(expected.cross_tier)  # once each
    latest = {(a["experiment_id"], a["tier"]): a for a in sends.to(config.topics.aggregates)}
    assert latest == {
        (a.experiment_id, a.tier): json.loads(a.model_dump_json()) for a in expected.tiers
    }
    assert len(tiers) == len(expected.tiers)


async def test_a_failed_batch_writes_neither_table_and_its_redelivery_reports_in_full() -> None:
    windows, tiers, experiments, sends, order = windows_hop()
    config = windows.settings
    batch = sample_runs(config)
    sends.fail_on = config.topics.cross_tier
    with pytest.raises(ConnectionError):
        await windows.handle(batch)
    assert not tiers
    assert not experiments
    assert not order
    assert not windows.published
    assert windows.reports is not None
    assert not windows.reports.cache
    sends.fail_on = None
    sends.sent.clear()
    await windows.handle(batch)  # redelivered
    expected = replay_lines(SAMPLE, config)
    assert {r["experiment_id"]: r for r in sends.to(config.topics.cross_tier)} == {
        r.experiment_id: r.model_dump(mode="json") for r in expected.cross_tier
    }


async def test_a_batch_that_fails_after_its_first_part_keeps_that_part_and_converges() -> None:
    """The broker refuses a report of the second part, after the first was confirmed: the first
    part's experiment is in both tables, nothing of the others; the batch redelivered holds the
    first part's runs as repeats, and the tables and the latest outputs are replay's."""
    windows, tiers, experiments, sends, _ = windows_hop(batch_max_keys=10)
    config = windows.settings
    write = tiers.write

    async def then_refuse() -> None:  # the first part's tier states, written
        await write()
        sends.fail_on = config.topics.cross_tier

    writers = windows.outputs.state_writers
    writers[writers.index(write)] = then_refuse
    batch = sample_runs(config)
    with pytest.raises(ConnectionError):
        await windows.handle(batch)
    [first] = {k.decode().split("/")[0] for k in tiers}
    assert len(tiers) == 7
    assert set(experiments) == {first.encode()}
    writers[writers.index(then_refuse)] = write
    sends.fail_on = None
    await windows.handle(batch)  # redelivered
    expected = replay_lines(SAMPLE, config)
    assert len(tiers) == len(expected.tiers)
    latest = {(a["experiment_id"], a["tier"]): a for a in sends.to(config.topics.aggregates)}
    assert latest == {
        (a.experiment_id, a.tier): json.loads(a.model_dump_json()) for a in expected.tiers
    }
    reports = {r["experiment_id"]: r for r in sends.to(config.topics.cross_tier)}
    assert reports == {r.experiment_id: r.model_dump(mode="json") for r in expected.cross_tier}
    ignored = samples(windows.exporter)
    repeats = sum(
        ignored.get(("evalstream_runs_ignored_total", (("reason", why),)), 0)
        for why in ("duplicate", "late")
    )  # in its window, or older than all of it
    assert repeats == sum(1 for line in SAMPLE if json.loads(line)["experiment_id"] == first)


async def test_a_retired_experiment_loses_its_report_before_its_tiers_go() -> None:
    windows, tiers, experiments, sends, order = windows_hop(experiment_idle_ttl_s=60)
    config = windows.settings
    await windows.handle(sample_runs(config))
    order.clear()
    sends.sent.clear()
    later = to_epoch_us(datetime.now(UTC)) + 3_600 * 1_000_000
    retired = await windows.retire_idle(later)
    assert retired
    assert set(retired) == {r.experiment_id for r in replay_lines(SAMPLE, config).cross_tier}
    assert set(sends.tombstones(config.topics.cross_tier)) == {e.encode() for e in retired}
    assert not experiments
    assert not tiers
    assert order == ["experiments", "tiers"]
    assert not [
        labels
        for (name, labels) in samples(windows.exporter)
        if name.startswith("evalstream_experiment_")
    ]


def survivor(table: Ordered, order: list[str]) -> Ordered:
    """What a crashed worker's table leaves for its successor: what it wrote, not what it held."""
    again = Ordered(table.sends, table.name, order)
    again.update(table)
    return again


async def test_a_crash_between_the_two_tables_writes_folds_the_same_figures_again() -> None:
    """The experiments' states are written, the tiers' are not (a SIGKILL in between): the
    redelivered runs are not in their windows yet, and fold into the same figures again."""
    windows, tiers, experiments, sends, order = windows_hop()
    config = windows.settings
    batch = sample_runs(config)
    half = len(batch) // 2
    await windows.handle(batch[:half])

    async def killed() -> None:
        raise SystemExit("SIGKILL between the two writes")

    windows.outputs.state_writers[1] = killed  # the second table's write never happens
    with pytest.raises(SystemExit):
        await windows.handle(batch[half:])
    assert order == ["experiments", "tiers", "experiments"]

    _, sends_after, exporter, outputs = wiring()
    kept_experiments, kept_tiers = survivor(experiments, order), survivor(tiers, order)
    reports = CrossTierStage(kept_experiments, CHANGELOG, config, outputs, exporter)
    again = WindowsStage(kept_tiers, "tier-windows-changelog", config, outputs, exporter)
    again.feed(reports)
    await again.handle(batch[half:])  # redelivered: its offsets were not committed
    expected = replay_lines(SAMPLE, config)
    latest = {r["experiment_id"]: r for r in sends.to(config.topics.cross_tier)}
    latest |= {r["experiment_id"]: r for r in sends_after.to(config.topics.cross_tier)}
    assert latest == {r.experiment_id: r.model_dump(mode="json") for r in expected.cross_tier}
    figures: dict[str, dict[str, TierFigures]] = {}
    for aggregate in expected.tiers:  # and the states hold every tier's latest figures
        figures.setdefault(aggregate.experiment_id, {})[aggregate.tier] = TierFigures.of(aggregate)
    assert {k.decode(): reports.load(k.decode(), v) for k, v in kept_experiments.items()} == figures


async def test_a_quarantined_experiment_is_made_again_from_its_tiers_in_the_windows_table() -> None:
    """An experiment state that does not load, met by a batch that touches one of its tiers or
    by a restoration: its report covers every tier the windows table holds, as `replay`'s does,
    not only the tiers of the batch."""
    windows, tiers, experiments, sends, _ = windows_hop()
    config = windows.settings
    await windows.handle(sample_runs(config))
    experiment = json.loads(SAMPLE[0])["experiment_id"]
    new_run = {
        **json.loads(SAMPLE[0]),
        "run_id": f"{experiment}/T0/new/run_01",
        "completed_at": "2027-01-01T00:00:00Z",  # after every run of the sample
    }
    lines = [*SAMPLE, json.dumps(new_run).encode()]
    expected = next(
        r for r in replay_lines(lines, config).cross_tier if r.experiment_id == experiment
    )
    assert len(expected.tiers) > 1
    experiments[experiment.encode()] = b'{"T0": "nope"}'
    assert windows.reports is not None
    windows.reports.drop_cache()
    sends.sent.clear()
    await windows.handle(forwarded(config, new_run))
    [letter] = sends.to(config.topics.dead_letter)
    assert letter["reason"] == "state_error"
    [report] = sends.to(config.topics.cross_tier)
    assert report == expected.model_dump(mode="json")

    stored = experiments[experiment.encode()]
    experiments[experiment.encode()] = b'{"T0": "nope"}'  # met by a batch that changes nothing
    windows.reports.drop_cache()
    sends.sent.clear()
    await fold(windows.reports, [Published.tombstone(experiment, "T99")])
    assert sends.to(config.topics.cross_tier)[-1] == report
    assert experiments[experiment.encode()] == stored

    experiments[experiment.encode()] = b'{"T0": "nope"}'  # and met by a restoration
    config2, sends2, exporter2, outputs2 = wiring()
    reports2 = CrossTierStage(experiments, CHANGELOG, config2, outputs2, exporter2)
    windows2 = WindowsStage(tiers, "tier-windows-changelog", config2, outputs2, exporter2)
    windows2.feed(reports2)
    await recover(reports2, set(range(4)))
    [again] = sends2.to(config2.topics.cross_tier)
    assert again == report


async def test_a_quarantined_experiment_met_only_by_an_aggregate_it_cannot_take() -> None:
    """The aggregate is its own dead letter; the experiment is made again from its stored tiers
    without it, rather than the batch failing on it at every redelivery."""
    stage, table, sends = make_stage()
    config = stage.settings
    report = replay_lines(SAMPLE, config)
    experiment = report.cross_tier[0].experiment_id
    figures = {a.tier: TierFigures.of(a) for a in report.tiers if a.experiment_id == experiment}
    stage.stored_figures = lambda e: dict(figures) if e == experiment else {}
    table[experiment.encode()] = b'{"T0": "nope"}'
    bad = Published(experiment, "no-tier", TierFigures(0.5, 0.5, 0.5, None, 1, 1, 0.5), b"{}")
    await fold(stage, [bad])
    reasons = sorted(letter["reason"] for letter in sends.to(config.topics.dead_letter))
    assert reasons == ["processing_error", "state_error"]
    assert sends.to(config.topics.cross_tier)[-1] == report.cross_tier[0].model_dump(mode="json")
