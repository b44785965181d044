"""The sequential drop detectors: quiet on stationary tiers at any pass rate, quick on falls, one
page per incident, a reference that a drop cannot feed, and the stated false-alarm bound."""

from __future__ import annotations

import dataclasses
import json
import random
import statistics

import pytest

from stream_app.core.config import CoreConfig
from stream_app.core.drop_detector import (
    DETECTORS,
    MAX_STRATA,
    STRATUM_RUNS,
    DropDesign,
    DropState,
    Reference,
)
from stream_app.core.totals import UNIT, units
from tests.simulation_size import trials

DESIGN = CoreConfig().drop_design


def runs(
    rnd: random.Random, count: int, pass_rate: float, passed_score: float = 0.92
) -> list[tuple[float, float]]:
    """(passed, judge score) of `count` runs: passed runs score around `passed_score`, failed
    ones around 0.4."""
    out = []
    for _ in range(count):
        passed = rnd.random() < pass_rate
        mean, spread = (passed_score, 0.05) if passed else (0.4, 0.2)
        out.append((1.0 if passed else 0.0, min(1.0, max(0.0, rnd.gauss(mean, spread)))))
    return out


def feed(
    state: DropState, stream: list[tuple[float, float]], design: DropDesign = DESIGN
) -> tuple[DropState, list[tuple[int, str]]]:
    pages: list[tuple[int, str]] = []
    for i, (passed, score) in enumerate(stream):
        state, page = state.observe(passed, score, design)
        if page is not None:
            pages.append((i, page))
    return state, pages


def test_warm_up_learns_the_reference_and_watches_nothing() -> None:
    rnd = random.Random(1)
    state, pages = feed(DropState(), runs(rnd, DESIGN.warmup_runs - 1, 0.0))
    assert not pages
    assert not state.monitoring(DESIGN)
    assert state.reference.runs == DESIGN.warmup_runs - 1
    assert state.evidence == (0.0,) * 6
    assert state.recovery == (0.0,) * 2
    state, _ = state.observe(1.0, 0.9, DESIGN)
    assert state.monitoring(DESIGN)


@pytest.mark.parametrize("pass_rate", [0.05, 0.3, 0.6, 0.9, 0.99])
def test_a_stationary_tier_does_not_page(pass_rate: float) -> None:
    """20,000 runs at a fixed pass rate and score spread: no page, and the references are
    below the truth (learned conservatively)."""
    state, pages = feed(DropState(), runs(random.Random(int(pass_rate * 100)), 20_000, pass_rate))
    assert pages == []
    assert state.reference.pass_rate(DESIGN.reference_z) <= pass_rate
    # it learned its drop_reference_runs, then stayed
    assert state.reference.runs == DESIGN.reference_runs


@pytest.mark.parametrize(
    ("before", "after", "most"), [(0.9, 0.3, 40), (0.9, 0.6, 150), (0.5, 0.1, 120)]
)
def test_a_pass_rate_fall_pages_once_and_stays_dropped(
    before: float, after: float, most: int
) -> None:
    rnd = random.Random(2)
    state, pages = feed(DropState(), runs(rnd, 2000, before))
    assert pages == []
    learned = state.reference
    state, pages = feed(state, runs(rnd, 500, after))
    assert len(pages) == 1, pages  # one incident, one page, however long it lasts
    at, detector = pages[0]
    assert at < most
    assert detector == "pass_rate"
    assert state.dropped
    assert state.reference.runs - learned.runs < at  # the drop stopped feeding its yardstick
    assert state.ratio("pass_rate", DESIGN) > 0.5  # the evidence stays high while it lasts


def test_a_score_only_fall_pages_through_the_score_detector() -> None:
    rnd = random.Random(3)
    state, _ = feed(DropState(), runs(rnd, 2000, 0.9))
    state, pages = feed(state, runs(rnd, 300, 0.9, passed_score=0.4))
    assert [d for _, d in pages] == ["score"]
    assert pages[0][0] < 40


def test_a_recovered_tier_clears_afresh_and_can_page_again() -> None:
    """Back at its reference, a dropped tier clears after enough runs to show it (the recovery
    test's own threshold), starts a new warm-up, and pages again on a new drop."""
    rnd = random.Random(4)
    state, _ = feed(DropState(), runs(rnd, 1000, 0.9))
    state, first = feed(state, runs(rnd, 200, 0.2))
    assert len(first) == 1
    assert state.dropped
    cleared_at = None
    for i, (passed, score) in enumerate(runs(rnd, 3000, 0.9)):
        state, page = state.observe(passed, score, DESIGN)
        assert page is None
        if not state.dropped:
            cleared_at = i
            break
    assert cleared_at is not None
    assert 100 < cleared_at < 1500  # evidence of recovery takes a few hundred good runs
    assert state == DropState()  # afresh: a new reference
    state, again = feed(state, runs(rnd, 300, 0.9) + runs(rnd, 200, 0.2))
    assert len(again) == 1


@pytest.mark.simulation
@pytest.mark.parametrize(
    ("before", "after", "stays"),
    [
        (0.5, 0.35, False),
        (0.7, 0.55, False),
        (0.3, 0.2, False),
        (0.9, 0.8, False),
        (0.9, 0.6, True),
    ],
)
def test_a_lasting_fall_pages_once(before: float, after: float, stays: bool) -> None:
    """A fall that lasts, even one smaller than drop_smallest_fall, is one incident: it pages at
    most once in 20,000 runs, never clearing at its lower level only to page again (a clear
    starts afresh: the lower level is then the reference). A fall of the smallest fall or more
    stays dropped: recovery needs the runs back within half of it. (5,000 runs in `make test`.)"""
    for tier in range(4):
        rnd = random.Random(f"lasting {before} {after} {tier}")
        state, early = feed(DropState(), runs(rnd, 1200, before))
        state, pages = feed(state, runs(rnd, trials(quick=5_000, full=20_000), after))
        assert early == []
        assert len(pages) <= 1, pages
        if stays:
            assert len(pages) == 1
            assert state.dropped


@pytest.mark.simulation
def test_false_pages_stay_within_the_stated_budget() -> None:
    """The guarantee itself, with a budget small enough to measure: a tier whose runs are as good
    as its reference pages falsely at most once per `false_page_runs` runs on average. Here
    400,000 Bernoulli(0.5) runs (100,000 in `make test`) with the reference learned from them,
    1,000 runs a page allowed: at most 400 pages (the bound), and at least some (the test can
    see a page at all)."""
    design = dataclasses.replace(DESIGN, false_page_runs=1_000, warmup_runs=10)
    rnd = random.Random(5)
    state, total = DropState(), 0
    count = trials(quick=100_000, full=400_000)
    for _ in range(count):
        state, page = state.observe(float(rnd.random() < 0.5), rnd.random(), design)
        total += page is not None
    assert 0 < total <= count / design.false_page_runs


def test_a_reference_at_zero_cannot_fall() -> None:
    """A tier that never passes: the pass-rate detector has nothing to watch (no evidence, no
    page), while the score detector still works."""
    state, pages = feed(DropState(), [(0.0, 0.5)] * 500)
    assert pages == []
    assert state.statistic("pass_rate") == 0.0


def test_state_round_trips_and_rejects_what_no_runs_make() -> None:
    rnd = random.Random(6)
    state, _ = feed(DropState(), runs(rnd, 300, 0.7))
    raw = json.loads(json.dumps(state.to_state()))
    assert DropState.from_state(raw) == state
    [[name, n, p, s, q]] = raw["t"]
    bad = [
        "x",
        {**raw, "t": [[name, -1, p, s, q]]},
        {**raw, "t": [[name, True, p, s, q]]},
        {**raw, "t": [[name, n, n + 1, s, q]]},
        {**raw, "t": [[name, n, p, n * UNIT + 1, q]]},
        {**raw, "t": [[name, n, p, s, s + n + 2]]},  # squares above the sum: no scores in [0, 1]
        {**raw, "t": [[name, n, p, s, q], [name, n, p, s, q]]},  # a stratum twice
        {**raw, "t": [["x" * 201, n, p, s, q]]},
        {**raw, "t": [[name, n, p, s]]},
        {**raw, "w": -1},
        {**raw, "r": raw["r"][:-1]},
        {**raw, "u": [*raw["u"][:-1], -1.0]},
        {**raw, "u": [1.0]},
        {**raw, "r": [10**400, *raw["r"][1:]]},  # too large for a float: no OverflowError
        {**raw, "r": [*raw["r"][:-1], float("nan")]},
        {**raw, "d": 1},
    ]
    for data in bad:
        with pytest.raises(ValueError, match="drop state"):
            DropState.from_state(data)
    # the one-reference state before strata: no release stored it (docs/architecture.md)
    before = {"n": n, "p": p, "s": s, "q": q, "r": raw["r"], "u": raw["u"], "d": raw["d"]}
    with pytest.raises(ValueError, match="drop state has no strata"):
        DropState.from_state(before)
    # statistics no run under the design leaves: refused when the design is known
    unreachable = [
        {**raw, "r": [1e300, *raw["r"][1:]]},
        {**raw, "r": [3 * DESIGN.threshold] * 3 + raw["r"][3:]},  # at the threshold, not dropped
        {**raw, "u": [5.0, 0.0]},  # recovering without a drop
    ]
    for data in unreachable:
        DropState.from_state(data)  # a well-formed state...
        with pytest.raises(ValueError, match="drop state"):
            DropState.from_state(data, DESIGN)  # ...that no run makes


def test_sums_do_not_depend_on_the_order_of_the_runs() -> None:
    rnd = random.Random(7)
    scores = [rnd.random() for _ in range(1000)]
    forward, backward = Reference(), Reference()
    for s in scores:
        forward = forward.add(1.0, s)
    for s in reversed(scores):
        backward = backward.add(1.0, s)
    assert forward == backward
    assert forward.score_units == sum(units(s) for s in scores)
    assert forward.variance() == pytest.approx(
        sum((s - sum(scores) / 1000) ** 2 for s in scores) / 999, rel=1e-9
    )


def test_the_budget_is_split_between_the_detectors() -> None:
    assert DESIGN.threshold == 2 * DESIGN.false_page_runs
    assert len(DETECTORS) == 2


RATES = [round(0.05 * k, 2) for k in range(1, 20)]


@pytest.mark.parametrize("pass_rate", RATES)
def test_no_false_page_at_any_pass_rate_from_5_to_95(pass_rate: float) -> None:
    """The defaults at every 5 % step: 4 tiers x 5,000 runs (380,000 runs in all; at the
    stated bound of one per 1,000,000, 0.4 pages would be expected, and `make simulate`
    measures far fewer)."""
    for tier in range(4):
        rnd = random.Random(f"{pass_rate}/{tier}")
        assert feed(DropState(), runs(rnd, 5000, pass_rate))[1] == []


@pytest.mark.simulation
@pytest.mark.parametrize(
    ("before", "after", "passed_score", "target"),
    [
        (0.9, 0.3, 0.92, 20),
        (0.9, 0.6, 0.92, 60),
        (0.5, 0.1, 0.92, 60),
        (0.9, 0.9, 0.40, 40),  # the pass rate kept, scores from A-level to D-level
    ],
)
def test_the_delay_targets(before: float, after: float, passed_score: float, target: int) -> None:
    """Issue 24's targets: 20 tiers, 2,000 stationary runs, then the drop: at least 19 paged
    within 500 runs, and the median delay within the target."""
    found = []
    for tier in range(20):
        rnd = random.Random(f"{before}>{after}/{passed_score}/{tier}")
        state, early = feed(DropState(), runs(rnd, 2000, before))
        assert early == []
        _, pages = feed(state, runs(rnd, 500, after, passed_score=passed_score))
        found.append(pages[0][0] + 1 if pages else 10**9)
    assert sum(d <= 500 for d in found) >= 19
    assert statistics.median(found) <= target


def harness_order(
    rnd: random.Random, rates: list[float], block: int, count: int
) -> list[tuple[str, float, float]]:
    """(subtest, passed, score) in a harness's order: `block` runs of subtest 00 back to back,
    then of 01, and so on, the sweep repeated."""
    out: list[tuple[str, float, float]] = []
    while len(out) < count:
        for k, rate in enumerate(rates):
            for passed, score in runs(rnd, block, rate):
                out.append((f"{k:02d}", passed, score))
    return out[:count]


def test_a_block_of_a_hard_subtest_is_not_a_drop() -> None:
    """24 subtests from always failing to always passing, 10 runs of each back to back: measured
    against one reference for the tier this pages; against each subtest's own, never."""
    rnd = random.Random(11)
    rates = [0.0] * 4 + [1.0] * 8 + [rnd.betavariate(4, 1) for _ in range(12)]
    stream = harness_order(rnd, rates, 10, 20_000)
    stratified, pooled = DropState(), DropState()
    stratified_pages = pooled_pages = 0
    for subtest, passed, score in stream:
        stratified, page = stratified.observe(passed, score, DESIGN, subtest)
        stratified_pages += page is not None
        pooled, page = pooled.observe(passed, score, DESIGN)
        pooled_pages += page is not None
    assert pooled_pages > 0  # the shape of the traffic is what pages without strata
    assert stratified_pages == 0
    assert stratified.monitoring(DESIGN)
    assert stratified.watched > 15_000
    assert set(stratified.strata) == {f"{k:02d}" for k in range(24)}


def test_a_subtest_seen_for_the_first_time_is_no_evidence() -> None:
    rnd = random.Random(12)
    state = DropState()
    for _, passed, score in harness_order(rnd, [0.9], 1, 200):
        state, _ = state.observe(passed, score, DESIGN, "00")
    assert state.monitoring(DESIGN)
    evidence = state.evidence
    for i in range(STRATUM_RUNS):
        seen, page = state.observe_run(0.0, 0.0, "new", DESIGN)
        assert seen.evidence == evidence
        assert page is None
        state, _ = state.observe(float(i % 2), 0.5, DESIGN, "new")
    assert state.observe_run(0.0, 0.0, "new", DESIGN)[0].evidence != evidence


def test_a_subtest_that_cannot_fall_leaves_the_evidence_as_it_is() -> None:
    """Runs of a subtest that never passed tell nothing of a fall: the tier's statistic is left
    as it is, not started again (which would hide a fall of the other subtests)."""
    rnd = random.Random(13)
    state = DropState()
    for _, passed, score in harness_order(rnd, [0.9], 1, 300):
        state, _ = state.observe(passed, score, DESIGN, "00")
    for _ in range(20):
        state, _ = state.observe(0.0, 0.0, DESIGN, "never")
    for _ in range(5):  # the fall shows in "00"
        state, _ = state.observe(0.0, 0.1, DESIGN, "00")
    evidence = state.evidence
    assert max(evidence[:3]) > 1
    for _ in range(3):
        state, _ = state.observe(0.0, 0.0, DESIGN, "never")
    assert state.evidence[:3] == evidence[:3]


def test_strata_are_bounded() -> None:
    state = DropState()
    for k in range(MAX_STRATA + 5):
        state, _ = state.observe(1.0, 0.9, DESIGN, f"s{k}")
    assert len(state.strata) == MAX_STRATA
    assert not state.learns("one more", DESIGN)


def test_strata_names_are_bounded_in_bytes() -> None:
    """Names of control characters take six bytes a character stored: the budget, not the
    count, stops them, and a stored state over it is refused."""
    state = DropState()
    for k in range(MAX_STRATA):
        state, _ = state.observe(1.0, 0.9, DESIGN, chr(k + 1) * 200)
    assert 0 < len(state.strata) < MAX_STRATA
    raw = state.to_state()
    assert DropState.from_state(raw) == state
    raw["t"].append(["\x7f" * 200, 1, 1, 0, 0])
    with pytest.raises(ValueError, match="budget"):
        DropState.from_state(raw)
