"""Replay, checked against an independent oracle written with the standard library."""

import json
import math
import random
import statistics
from collections import defaultdict
from datetime import datetime
from typing import Any

import pytest

from helpers import SAMPLE_FILE, encode, make_event
from stream_app.core.config import CoreConfig
from stream_app.core.replay import replay_lines

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
        assert agg.cost_usd.mean == pytest.approx(exp["cost_mean"], rel=1e-12)
        assert agg.pass_rate.mean == pytest.approx(exp["pass_mean"], abs=1e-12)
        n = agg.runs
        assert agg.pass_at_k["1"] == pytest.approx(exp["passes"] / n)
        assert set(agg.pass_at_k) == {str(k) for k in (1, 5, 10) if k <= n}


def test_order_and_duplicates_do_not_change_the_result() -> None:
    lines = SAMPLE_FILE.read_bytes().splitlines()
    baseline = replay_lines(lines, CONFIG)
    rnd = random.Random(7)
    noisy = lines + rnd.sample(lines, 100)
    rnd.shuffle(noisy)
    again = replay_lines(noisy, CONFIG)
    assert again.tiers == baseline.tiers
    assert again.cross_tier == baseline.cross_tier
    assert again.ignored.duplicate + again.ignored.late >= 100


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
        ("zeta", "T2"),
        ("zeta", "T10"),
    ]
    assert [c.experiment_id for c in report.cross_tier] == ["alpha", "zeta"]
    assert [(r.line, r.reason) for r in report.rejected] == [
        (4, "invalid_json"),
        (7, "unknown_model"),
    ]
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


def test_all_failed_tier_reports_infinite_cost_of_pass_as_string() -> None:
    events = [encode(make_event(run_id=f"r{i}", passed=False)) for i in range(3)]
    report = replay_lines(events, CONFIG)
    assert report.tiers[0].cost_of_pass.median == math.inf
    text = report.model_dump_json()
    assert '"median":"Infinity"' in text
    assert "NaN" not in text
    assert report.tiers[0].pass_at_k == {"1": 0.0}
