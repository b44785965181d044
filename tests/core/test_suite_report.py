"""A suite's tiers reported again and again as runs come, go and restart: each tier's
comparison is brought up to date with what moved (`core.suite.comparison`), never remade, and
every report equals the one made from fresh states of the same shares."""

from __future__ import annotations

import hashlib
import random

import pytest

from stream_app.core.config import CoreConfig
from stream_app.core.suite.comparison import TierComparison
from stream_app.core.suite.evidence import SIZE
from stream_app.core.suite.message import SuiteRun
from stream_app.core.suite.report import REPORT_FORMAT, suite_tiers
from stream_app.core.suite.state import SuiteState

DESIGN = CoreConfig().drop_design
TIERS = ("T0", "T1", "T2")
MINUTE_US = 60_000_000


def fresh(states: dict[str, SuiteState]) -> dict[str, SuiteState]:
    """The same shares in new states: comparisons made from every stratum at once."""
    return {t: SuiteState({n: s.copy() for n, s in st.shares.items()}) for t, st in states.items()}


@pytest.mark.parametrize("seed", range(6))
def test_reports_kept_up_to_date_equal_reports_made_afresh(seed: int) -> None:
    """Tasks in harness order (one after another, now and then an earlier one late), with
    repeats, restarts, retirements, a baseline that comes and goes, and states made anew."""
    rnd = random.Random(seed)
    states = {t: SuiteState() for t in TIERS}
    tasks = [f"task{i:03d}" for i in range(rnd.randint(2, 30))]
    sequence: dict[tuple[str, str], tuple[int, int]] = {}  # (task, tier): (epoch, seq)
    at, current, reports, kept = 600 * MINUTE_US, 0, 0, 0
    for step in range(400):
        tier = rnd.choice(TIERS)
        if rnd.random() < 0.03 and states[tier].shares:
            states[tier].remove(rnd.choice(sorted(states[tier].shares)))
        else:
            current = min(current + (rnd.random() < 0.15), len(tasks) - 1)
            task = tasks[current] if rnd.random() < 0.9 else rnd.choice(tasks)
            epoch, seq = sequence.get((task, tier), (0, 0))
            if rnd.random() < 0.02:
                epoch, seq = epoch + 1, 0
            seq += rnd.random() > 0.05  # now and then a repeat
            sequence[task, tier] = (epoch, seq)
            at += rnd.randint(-1, 10) * MINUTE_US
            evidence = tuple(rnd.randint(-5, 5) for _ in range(SIZE))
            passed, composite = rnd.random() < 0.5, round(rnd.random(), 3)
            states[tier].add(task, SuiteRun(task, epoch, seq, at, evidence, passed, composite))
        if rnd.random() < 0.2 or step == 399:
            shown = {t: s for t, s in states.items() if t != "T0" or rnd.random() > 0.1}
            confidence = rnd.choice((0.95, 0.99))
            before = {t: s.comparison for t, s in shown.items()}
            reported = list(suite_tiers("s", shown, DESIGN, "T0", confidence))
            assert reported == list(suite_tiers("s", fresh(shown), DESIGN, "T0", confidence))
            reports += 1
            kept += sum(1 for t, s in shown.items() if s.shares and s.comparison is before[t])
            if rnd.random() < 0.05:  # a state made anew (reloaded): so is its comparison
                tier = rnd.choice(TIERS)
                states[tier] = states[tier].copy()
                assert states[tier].comparison is None
    assert reports > 40
    assert kept > 2 * reports  # most reports updated the comparisons they had


def test_a_comparison_takes_out_what_left_and_puts_back_what_moved() -> None:
    state = SuiteState()
    for seq, task in enumerate(("b", "a", "a"), start=1):  # b closed when a started
        state.add(task, SuiteRun(task, 0, seq, seq * MINUTE_US, (0,) * SIZE, True, 1.0))
    assert state.moved == {"a", "b"}
    comparison = TierComparison()
    assert comparison.update(state.shares, state.moved) == {"a", "b"}
    state.moved.clear()
    assert comparison.update(state.shares, state.moved) == set()
    state.remove("a")
    assert comparison.closings.closed == {"a": None, "b": 2 * MINUTE_US}
    assert comparison.update(state.shares, state.moved) == {"a", "b"}  # b is open again
    assert comparison.closings.closed == {"b": None}
    assert set(comparison.seen) == {"b"}
    assert comparison.means[next(iter(comparison.means))].count == 1


PINNED: dict[int, str] = {1: "7cca089166fef0a3"}
"""The sha256 (first 16 hex digits) of `pinned_reports`' JSON under each report format."""


def pinned_reports() -> bytes:
    """A suite of three tiers, a dozen experiments, a few hundred runs: its reports' JSON."""
    rnd = random.Random(43)
    states = {t: SuiteState() for t in TIERS}
    for seq in range(1, 25):
        for k in range(12):
            for t in TIERS:
                passed = rnd.random() < 0.4 + 0.2 * TIERS.index(t)
                evidence = tuple(rnd.randrange(-300, 300) for _ in range(SIZE))
                at = (k * 24 + seq) * MINUTE_US
                states[t].add(f"e{k}", SuiteRun(f"e{k}", 7, seq, at, evidence, passed, 0.7))
    config = CoreConfig()
    reports = suite_tiers("agent", states, DESIGN, "T0", config.interval_confidence)
    return b"\n".join(r.model_dump_json().encode() for r in reports)


def test_a_reports_bytes_change_only_with_the_format() -> None:
    """A change that alters a published suite report must raise `REPORT_FORMAT` (and pin its
    digest here): restarted workers then publish their suites again instead of keeping reports
    the code no longer makes (their marks say which format made them)."""
    digest = hashlib.sha256(pinned_reports()).hexdigest()[:16]
    assert PINNED.get(REPORT_FORMAT) == digest, "raise REPORT_FORMAT, pin the new digest"
