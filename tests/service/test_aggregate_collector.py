"""The aggregate gauges, built at scrape time from the latest aggregate and report per key."""

import math
from datetime import UTC, timedelta, timezone, tzinfo

import pytest

from schemas import CrossTierReport, TierAggregate
from stream_app import __version__
from stream_app.core.replay import replay_lines
from stream_app.service import aggregate_collector
from stream_app.service.aggregate_collector import (
    EXPERIMENT_FAMILIES,
    TIER_FAMILIES,
    AggregateCollector,
    TierRows,
    experiment_lines,
    tier_fields,
    tier_lines,
)
from stream_app.service.exported_statistics import ExportedStatistics
from stream_app.service.exporter import Exporter
from stream_app.service.settings import ConfigError, load_settings
from tests.helpers import encode, make_event
from tests.stage_doubles import samples


def replayed(n_tiers: int) -> tuple[list[TierAggregate], list[CrossTierReport]]:
    lines = [
        encode(make_event(run_id=f"{t}-{i}", experiment_id="exp", tier=f"T{t}"))
        for t in range(n_tiers)
        for i in range(3)
    ]
    report = replay_lines(lines, load_settings())
    return report.tiers, report.cross_tier


def series(exporter: Exporter, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples(exporter).items() if n == name}


def test_a_tier_has_its_statistics_grade_window_and_pass_at_k() -> None:
    exporter = Exporter(__version__)
    [agg, *_] = replayed(1)[0]
    exporter.set_tier(agg)
    labels = (("experiment", "exp"), ("stat", "mean"), ("tier", "T0"))
    assert series(exporter, "evalstream_tier_pass_rate") == {labels: agg.pass_rate.mean}
    tier = (("experiment", "exp"), ("tier", "T0"))
    assert series(exporter, "evalstream_tier_window_runs") == {tier: 3}
    assert series(exporter, "evalstream_tier_grade_points")[tier] in (0, 1, 2, 3, 4)
    assert set(series(exporter, "evalstream_tier_pass_at_k")) == {
        (*tier[:1], ("k", k), *tier[1:]) for k in agg.pass_at_k
    }


def test_a_removed_tier_and_experiment_leave_no_series() -> None:
    exporter = Exporter(__version__)
    tiers, [report] = replayed(2)
    for agg in tiers:
        exporter.set_tier(agg)
    exporter.set_experiment(report)
    exporter.remove_tier("exp", "T0")
    exporter.remove_experiment("exp")
    names = {n for (n, labels) in samples(exporter) if ("tier", "T0") in labels}
    assert not {n for n in names if n.startswith("evalstream_tier_")}
    assert not series(exporter, "evalstream_experiment_cost_delta_usd")
    assert series(exporter, "evalstream_tier_window_runs")  # T1 is still there


def test_uplift_is_absent_where_undefined_and_present_where_finite() -> None:
    exporter = Exporter(__version__)
    _, [report] = replayed(3)
    exporter.set_experiment(report.model_copy(update={"tier_uplift": {"T1": math.inf, "T2": 0.5}}))
    uplift = series(exporter, "evalstream_tier_uplift_ratio")
    assert uplift == {(("experiment", "exp"), ("tier", "T2")): 0.5}


def test_a_thousand_experiments_of_seven_tiers_all_render() -> None:
    """Every tier of 1,000 experiments is rendered (the benchmark prints how fast)."""
    exporter = Exporter(__version__)
    [agg] = replayed(1)[0]
    for e in range(1000):
        for t in range(7):
            exporter.set_tier(agg.model_copy(update={"experiment_id": f"e{e}", "tier": f"T{t}"}))
    text = exporter.render()
    assert text.count(b'evalstream_tier_window_runs{experiment="e999"') == 7
    assert text.count(b"evalstream_tier_window_runs{") == 7000


def test_the_consumer_lag_is_replaced_as_a_whole() -> None:
    exporter = Exporter(__version__)
    exporter.consumer_lag.replace({("run-completed", 0): 5, ("run-completed", 1): 0})
    assert series(exporter, "evalstream_consumer_lag_messages") == {
        (("partition", "0"), ("topic", "run-completed")): 5,
        (("partition", "1"), ("topic", "run-completed")): 0,
    }
    exporter.consumer_lag.replace({})
    assert not series(exporter, "evalstream_consumer_lag_messages")


def tier_series(exporter: Exporter) -> dict[str, int]:
    """Series per family that carry a tier label."""
    counts: dict[str, int] = {}
    for name, labels in samples(exporter):
        if ("tier", "T1") in labels:
            counts[name] = counts.get(name, 0) + 1
    return counts


def full_experiment(exporter: Exporter) -> None:
    lines = [
        encode(make_event(run_id=f"{t}-{i}", experiment_id="exp", tier=f"T{t}", passed=i % 3 > 0))
        for t in range(2)
        for i in range(60)  # past the drop detectors' warm-up (50 runs)
    ]
    report = replay_lines(lines, load_settings())
    for agg in report.tiers:
        exporter.set_tier(agg)
    exporter.set_experiment(report.cross_tier[0])


def test_the_series_budget_of_a_tier_by_default() -> None:
    """The figure docs/operations.md gives: 23 series per tier (with a full window, past the
    drop detectors' warm-up, before any grade change), plus one per grade-change direction,
    plus 4 per experiment."""
    exporter = Exporter(__version__)
    full_experiment(exporter)
    counts = tier_series(exporter)
    assert counts == {
        "evalstream_tier_pass_rate": 1,
        "evalstream_tier_impl_rate": 1,
        "evalstream_tier_composite_score": 1,
        "evalstream_tier_cost_usd": 1,
        "evalstream_tier_duration_seconds": 1,
        "evalstream_tier_cost_of_pass_usd": 1,
        "evalstream_tier_grade_points": 1,
        "evalstream_tier_window_runs": 1,
        "evalstream_tier_window_capacity": 1,
        "evalstream_tier_pass_at_k": 3,
        "evalstream_tier_uplift_ratio": 1,
        "evalstream_tier_dropped": 1,
        "evalstream_tier_drop_evidence_ratio": 2,
        "evalstream_tier_cumulative_runs": 1,
        "evalstream_tier_cumulative_pass_rate": 3,
        "evalstream_tier_pass_rate_difference": 3,
    }
    assert sum(counts.values()) == 23
    experiment = [n for n, labels in samples(exporter) if labels == (("experiment", "exp"),)]
    assert len(experiment) == 4


def test_all_statistics_can_be_selected() -> None:
    settings = load_settings(exported_statistics="all")
    exporter = Exporter(__version__, settings.exported_statistics)
    full_experiment(exporter)
    counts = tier_series(exporter)
    assert counts["evalstream_tier_pass_rate"] == 6
    assert sum(counts.values()) == 23 + 6 * 5
    chosen = load_settings(exported_statistics={"cost_usd": ["min", "max"]})
    exporter = Exporter(__version__, chosen.exported_statistics)
    full_experiment(exporter)
    ends = ("_rate", "_usd", "_score", "_seconds")
    stats = [n for n in tier_series(exporter) if n.endswith(ends) and "cumulative" not in n]
    assert stats == ["evalstream_tier_cost_usd"]
    assert tier_series(exporter)["evalstream_tier_cost_usd"] == 2


def test_an_unknown_statistic_or_field_is_a_configuration_error() -> None:
    for bad in ({"cost_usd": ["p99"]}, {"tokens": ["mean"]}, "some"):
        with pytest.raises(ConfigError, match="exported_statistics"):
            load_settings(exported_statistics=bad)


def test_drop_evidence_is_absent_while_a_tier_warms_up() -> None:
    exporter = Exporter(__version__)
    [agg] = replayed(1)[0]
    assert not agg.drop.monitoring
    exporter.set_tier(agg)
    assert not series(exporter, "evalstream_tier_drop_evidence_ratio")
    assert series(exporter, "evalstream_tier_dropped") == {
        (("experiment", "exp"), ("tier", "T0")): 0
    }
    bounds = series(exporter, "evalstream_tier_cumulative_pass_rate")
    tier = (("experiment", "exp"), ("tier", "T0"))
    assert {labels[0][1]: v for labels, v in bounds.items()} == {
        "estimate": agg.cumulative.pass_rate,
        "low": agg.cumulative.pass_rate_interval.low,
        "high": agg.cumulative.pass_rate_interval.high,
    }
    assert all(labels[1:] == tier for labels in bounds)


def test_the_page_holds_every_key_s_lines_whatever_the_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compact samples render to exactly the lines `tier_lines` and `experiment_lines`
    write, in order, across chunk boundaries, with a family that has one sample for most keys
    and several for a later one (two statistics of a field for one tier), and a label value
    that needs escaping and is not ASCII."""
    monkeypatch.setattr(aggregate_collector, "CHUNK_ROWS", 3)
    read = aggregate_collector.row_labels
    reads: list[int] = []  # each step of a render reads at most a chunk's rows

    def counted(rows: list[bytes], head: int, families: int) -> list[bytes]:
        reads.append(len(rows))
        return read(rows, head, families)

    monkeypatch.setattr(aggregate_collector, "row_labels", counted)
    tiers, [report] = replayed(2)
    exported: ExportedStatistics = {"composite_score": ("median",), "cost_usd": ("median",)}
    collector = AggregateCollector(exported)
    written = []
    for e in range(4):
        for agg in tiers:
            named = agg.model_copy(update={"experiment_id": f'é"{e}\\\n'})
            collector.set_tier(named)
            written.append(tier_lines(named, exported))
    collector.exported = {"composite_score": ("median", "max"), "cost_usd": ("median",)}
    wider = tiers[0].model_copy(update={"experiment_id": "last"})
    collector.set_tier(wider)
    written.append(tier_lines(wider, collector.exported))
    for e in range(5):
        named_report = report.model_copy(update={"experiment_id": f"x{e}"})
        collector.set_experiment(named_report)
    page = b"".join(collector.render()).decode()
    assert reads == [3, 3, 3, 3, 2]  # 9 tier rows, then 5 experiment rows: once a scrape
    expected = "".join(
        f"# HELP {name} {doc}\n# TYPE {name} gauge\n" + "".join(lines[i] for lines in written)
        for i, (name, doc) in enumerate(TIER_FAMILIES)
    )
    assert page.startswith(expected)
    assert (
        page.count('evalstream_tier_composite_score{experiment="last",tier="T0",stat="max"}') == 1
    )
    reports = [
        experiment_lines(report.model_copy(update={"experiment_id": f"x{e}"})) for e in range(5)
    ]
    assert page[len(expected) :] == "".join(
        f"# HELP {name} {doc}\n# TYPE {name} gauge\n" + "".join(lines[i] for lines in reports)
        for i, (name, doc) in enumerate(EXPERIMENT_FAMILIES)
    )
    # the rows hold the label text of their samples as shorthands, expanded by the render
    rows = [*collector.tiers.rows(), *collector.experiments.values()]
    for long in (b',stat="median"} ', b',bound="estimate"} ', b'"} '):
        assert not any(long in row for row in rows)
    assert page.count(',bound="estimate"} ') == 9 + 5 * len(report.pass_rate_difference)


@pytest.mark.parametrize("zone", [UTC, timezone(timedelta(hours=-7, minutes=-30))])
def test_a_tier_row_keeps_the_experiment_list_s_fields(zone: tzinfo) -> None:
    [agg, *_] = replayed(1)[0]
    latest = agg.latest_completed_at.astimezone(zone) + timedelta(microseconds=1)
    agg = agg.model_copy(update={"latest_completed_at": latest, "grade": "D"})
    collector = AggregateCollector()
    collector.set_tier(agg)
    fields = tier_fields(collector.tiers[("exp", "T0")])
    assert fields._asdict() == {
        "grade": "D",
        "runs": agg.runs,
        "capacity": agg.capacity,
        "composite_median": agg.composite_score.median,
        "latest_completed_at": latest,
        "dropped": agg.drop.dropped,
    }
    assert fields.latest_completed_at.isoformat() == latest.isoformat()  # its zone too


def test_tier_rows_are_a_mapping_kept_by_experiment() -> None:
    """Rows set, replaced and removed as in a dict keyed by (experiment, tier); an experiment's
    tiers iterate together, and its last tier removed takes it out."""
    rows = TierRows()
    for key, row in [(("a", "T0"), b"1"), (("b", "T0"), b"2"), (("a", "T1"), b"3")]:
        rows[key] = row
    rows[("a", "T0")] = b"4"
    assert len(rows) == 3
    assert list(rows) == [("a", "T0"), ("a", "T1"), ("b", "T0")]
    assert rows.rows() == [b"4", b"3", b"2"]
    assert rows == {("a", "T0"): b"4", ("a", "T1"): b"3", ("b", "T0"): b"2"}
    assert rows.pop(("a", "T0")) == b"4"
    assert rows.pop(("c", "T0"), None) is None
    del rows[("a", "T1")]
    assert ("a", "T1") not in rows
    assert list(rows.by_experiment) == ["b"]
    assert len(rows) == 1


def test_a_label_value_with_a_nul_byte_still_renders_exactly() -> None:
    """Shorthands are made over a key's samples joined by NUL bytes; a sample holding one (a
    pass@k label, were one ever to) is shortened alone, and the page is `tier_lines`'."""
    [agg], _ = replayed(1)
    odd = agg.model_copy(update={"pass_at_k": {"1\0": 0.5, "2": 1.0}})
    collector = AggregateCollector()
    collector.set_tier(odd)
    page = b"".join(collector.render()).decode()
    lines = tier_lines(odd, collector.exported)
    assert page == "".join(
        f"# HELP {name} {doc}\n# TYPE {name} gauge\n{lines[i]}"
        for i, (name, doc) in enumerate(TIER_FAMILIES)
    ) + "".join(f"# HELP {name} {doc}\n# TYPE {name} gauge\n" for name, doc in EXPERIMENT_FAMILIES)
    assert 'k="1\0"} 0.5' in page
