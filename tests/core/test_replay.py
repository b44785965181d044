"""Replay, checked against an independent oracle written with the standard library."""

import json
import math
import random
import statistics
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stream_app.core.config import CoreConfig
from stream_app.core.replay import replay_lines
from tests.helpers import SAMPLE_FILE, encode, make_event

CONFIG = CoreConfig()


def oracle(lines: list[bytes], window: int = 10) -> dict[tuple[str, str], dict[str, Any]]:
    """Top-`window` runs per key by (completed_at, run_id), then stdlib statistics."""
    runs: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for line in lines:
        e = json.loads(line)
        runs[(e["experiment_id"], e["tier"])].setdefault(e["run_id"], e)
    out = {}
    for key, by_id in runs.items():

        def order(e: dict[str, Any]) -> tuple[datetime, str]:
            return datetime.fromisoformat(e["completed_at"]), e["run_id"]

        kept = sorted(by_id.values(), key=order)[-window:]
        composite = [
            (float(e["passed"]) + e["judgment"]["summary"]["weighted_score"]) / 2 for e in kept
        ]
        out[key] = {
            "run_ids": [e["run_id"] for e in kept],
            "composite_median": statistics.median(composite),
            "composite_pstdev": statistics.pstdev(composite),
            "cost_mean": statistics.fmean(e["cost_usd"] for e in kept),
            "pass_mean": statistics.fmean(float(e["passed"]) for e in kept),
            "passes": sum(e["passed"] for e in kept),
        }
    return out


def test_sample_matches_the_oracle() -> None:
    lines = SAMPLE_FILE.read_bytes().splitlines()
    report = replay_lines(lines, CONFIG)
    expected = oracle(lines)
    assert len(report.tiers) == len(expected) == 21
    assert not report.rejected
    for agg in report.tiers:
        exp = expected[(agg.experiment_id, agg.tier)]
        assert agg.run_ids == exp["run_ids"]
        assert agg.composite_score.median == pytest.approx(exp["composite_median"], abs=1e-12)
        assert agg.composite_score.std_dev == pytest.approx(exp["composite_pstdev"], abs=1e-12)
        assert agg.cost_usd is not None  # every bundled run is priced
        assert agg.cost_usd.mean == pytest.approx(exp["cost_mean"], rel=1e-12)
        assert agg.pass_rate.mean == pytest.approx(exp["pass_mean"], abs=1e-12)
        n = agg.runs
        assert agg.pass_at_k["1"] == pytest.approx(exp["passes"] / n)
        assert set(agg.pass_at_k) == {str(k) for k in (1, 5, 10) if k <= n}


HISTORY = {"cumulative", "drop"}
"""What a tier's history decides, not its window: runs counted as they are accepted (a run that
arrives after ten newer ones of its tier is late and counts nowhere), the detectors in order."""


def test_order_and_duplicates_do_not_change_the_windows() -> None:
    lines = SAMPLE_FILE.read_bytes().splitlines()
    baseline = replay_lines(lines, CONFIG)
    rnd = random.Random(7)
    noisy = lines + rnd.sample(lines, 100)
    rnd.shuffle(noisy)
    again = replay_lines(noisy, CONFIG)
    assert [t.model_dump(exclude=HISTORY) for t in again.tiers] == [
        t.model_dump(exclude=HISTORY) for t in baseline.tiers
    ]
    windowed = {"pass_rate_difference", "composite_difference"}
    assert [c.model_dump(exclude=windowed) for c in again.cross_tier] == [
        c.model_dump(exclude=windowed) for c in baseline.cross_tier
    ]
    assert again.ignored.duplicate + again.ignored.late >= 100


def test_redelivered_runs_change_nothing_at_all() -> None:
    """At-least-once delivery: a run delivered again, however much later, is a duplicate (in the
    window) or late (evicted from it); the totals and the detectors count it once."""
    lines = SAMPLE_FILE.read_bytes().splitlines()
    baseline = replay_lines(lines, CONFIG)
    rnd = random.Random(8)
    noisy = list(lines)
    for line in rnd.sample(lines, 100):  # each again, somewhere after its first delivery
        noisy.insert(rnd.randint(noisy.index(line) + 1, len(noisy)), line)
    again = replay_lines(noisy, CONFIG)
    assert again.tiers == baseline.tiers
    assert again.cross_tier == baseline.cross_tier
    assert again.ignored.duplicate + again.ignored.late == baseline.ignored.late + 100


def test_sorting_rejections_blank_lines_and_counts() -> None:
    lines = [
        encode(make_event(run_id="a", experiment_id="zeta", tier="T10")),
        b"",
        b"   ",
        b"{not json",
        encode(make_event(run_id="b", experiment_id="zeta", tier="T2")),
        encode(make_event(run_id="b", experiment_id="zeta", tier="T2")),
        encode(
            make_event(run_id="c", experiment_id="alpha", tier="T1", model="nope", cost_usd=None)
        ),
        encode(make_event(run_id="d", experiment_id="alpha", tier="T0")),
    ]
    report = replay_lines([line + b"\n" for line in lines], CONFIG)
    assert [(t.experiment_id, t.tier) for t in report.tiers] == [
        ("alpha", "T0"),
        ("alpha", "T1"),
        ("zeta", "T2"),
        ("zeta", "T10"),
    ]
    unpriced = report.tiers[1]  # its model priced by no source: kept, its costs unknown
    assert (unpriced.cost_usd, unpriced.cost_of_pass, unpriced.pass_rate.mean) == (None, None, 1)
    assert [c.experiment_id for c in report.cross_tier] == ["alpha", "zeta"]
    alpha = report.cross_tier[0]  # the spread of costs is the priced tiers' (T0's alone)
    assert (alpha.cost_variance, alpha.cost_delta) == (0.0, 0.0)
    assert [(r.line, r.reason) for r in report.rejected] == [(4, "invalid_json")]
    assert report.ignored.duplicate == 1
    assert report.cross_tier[1].tier_uplift == {}  # zeta has no T0


def test_late_runs_are_counted() -> None:
    base = datetime.fromisoformat("2026-01-05T09:00:00+00:00")
    events = []
    for i in range(12):
        t = base.replace(minute=i).isoformat()
        events.append(encode(make_event(run_id=f"r{i}", started_at=t, completed_at=t)))
    report = replay_lines(events[1:] + events[:1], CONFIG)  # r0 arrives last: late
    assert report.ignored.late == 1
    assert report.tiers[0].run_ids == [f"r{i}" for i in range(2, 12)]


def test_a_run_sent_again_after_leaving_the_window_counts_once() -> None:
    """A hook and a watcher of the same logs both send a run, the second maybe much later: once
    the run has left the window its repeat is late, and no count moves."""
    base = datetime.fromisoformat("2026-01-05T09:00:00+00:00")
    events = []
    for i in range(12):
        t = base.replace(minute=i).isoformat()
        events.append(encode(make_event(run_id=f"r{i}", started_at=t, completed_at=t)))
    once = replay_lines(events, CONFIG)
    again = replay_lines(events + events[:2], CONFIG)  # r0 and r1 long gone from the window
    assert again.ignored.late == 2
    assert again.tiers == once.tiers  # cumulative counts included
    assert again.tiers[0].cumulative.runs == 12


def test_all_failed_tier_reports_infinite_cost_of_pass_as_string() -> None:
    events = [encode(make_event(run_id=f"r{i}", passed=False)) for i in range(3)]
    report = replay_lines(events, CONFIG)
    cost_of_pass = report.tiers[0].cost_of_pass
    assert cost_of_pass is not None
    assert cost_of_pass.median == math.inf
    text = report.model_dump_json()
    assert '"median":"Infinity"' in text
    assert "NaN" not in text
    assert report.tiers[0].pass_at_k == {"1": 0.0}


def dated(experiment: str, run: int, day: float, tier: str = "T0") -> bytes:
    """A run of `experiment` that completed `day` days after 2026-01-01."""
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day)
    return encode(
        make_event(
            run_id=f"{experiment}/{tier}/{run}",
            experiment_id=experiment,
            tier=tier,
            started_at=(at - timedelta(minutes=5)).isoformat(),
            completed_at=at.isoformat(),
        )
    )


TTL = CoreConfig(experiment_idle_ttl_s=14 * 86_400)


def test_an_experiment_idle_for_the_ttl_in_event_time_retires() -> None:
    lines = [dated("a", 1, 0), dated("a", 2, 1, tier="T1"), dated("b", 1, 15.5)]
    report = replay_lines(lines, TTL, retire=True)
    assert [(t.experiment_id, t.tier) for t in report.tiers] == [("b", "T0")]
    assert [c.experiment_id for c in report.cross_tier] == ["b"]
    assert [(r.experiment_id, r.at.isoformat()) for r in report.retired] == [
        ("a", "2026-01-16T12:00:00+00:00")
    ]
    kept = replay_lines(lines, CoreConfig(experiment_idle_ttl_s=0), retire=True)
    assert replay_lines(lines, TTL).retired == []  # replay retires only when asked
    assert len(kept.tiers) == 3
    assert kept.retired == []


def test_a_retired_experiment_that_runs_again_starts_fresh() -> None:
    lines = [dated("a", n, n / 10) for n in range(1, 11)] + [dated("a", 11, 20)]
    report = replay_lines(lines, TTL, retire=True)
    [tier] = report.tiers
    assert tier.run_ids == ["a/T0/11"]
    assert [r.experiment_id for r in report.retired] == ["a"]


def test_a_run_read_but_not_yet_folded_keeps_its_experiment_alive() -> None:
    # a's second run is read at 13.5 days (the clock), in the same chunk as b's runs
    lines = [dated("a", 1, 0), dated("b", 1, 13), dated("a", 2, 13.5), dated("b", 2, 27)]
    report = replay_lines(lines, TTL, retire=True)
    assert {t.experiment_id for t in report.tiers} == {"a", "b"}
    assert report.retired == []
    # …and one more day of b retires a, by the clock at which a's run was read
    report = replay_lines([*lines, dated("b", 3, 27.6)], TTL, retire=True)
    assert {t.experiment_id for t in report.tiers} == {"b"}


def test_a_late_run_counts_as_accepted_when_it_is_read() -> None:
    # a's run completed at day 1 but is read after b's at day 10: like the live worker, which
    # accepts it when it arrives, replay counts it at the clock (day 10), not at day 1
    lines = [dated("b", 1, 10), dated("a", 1, 1), dated("b", 2, 23)]
    report = replay_lines(lines, TTL, retire=True)
    assert {t.experiment_id for t in report.tiers} == {"a", "b"}
    report = replay_lines([*lines, dated("b", 3, 24.1)], TTL, retire=True)
    assert {t.experiment_id for t in report.tiers} == {"b"}


def test_a_run_dated_in_the_future_does_not_move_the_clock_past_now() -> None:
    today = (datetime.now(UTC) - datetime(2026, 1, 1, tzinfo=UTC)).total_seconds() / 86_400
    recent = [dated("a", n, today - 1 + n / 100) for n in range(1, 11)]  # yesterday
    report = replay_lines(
        [*recent, dated("b", 1, today + 365 * 80)], TTL, retire=True
    )  # 80 years ahead
    assert report.retired == []  # without the bound, the clock would be 80 years ahead
    assert {t.experiment_id for t in report.tiers} == {"a", "b"}
