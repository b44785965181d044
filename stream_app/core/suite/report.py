"""What the tiers of a suite show, made together: each tier's pass rate over the suite's
experiments, its difference from the baseline paired by experiment (all of a suite's differences
holding at once), and its drop detectors. The suite hop and `replay` both report with this."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from schemas.common import tier_sort_key
from schemas.suites import SuiteDifference, SuiteDrop, SuiteEstimate, SuiteTier
from stream_app.core.drop_detector import DropDesign
from stream_app.core.suite.state import SuiteState
from stream_app.metrics.suite_comparison import (
    Outcomes,
    SuiteFigure,
    paired_difference,
    suite_pass_rate,
)


def suite_reports(
    suite: str,
    states: Mapping[str, SuiteState],
    design: DropDesign,
    baseline_tier: str,
    confidence: float,
) -> Iterator[SuiteTier]:
    """Every tier of `suite` with an experiment left (`states`: its tiers' states), in numeric
    order, one at a time: each takes a millisecond or two, and the suite hop lets the other
    hops run in between. With m tiers paired with the baseline, each difference is at
    1 - (1 - confidence) / m (Bonferroni), so that all hold at once at every moment: a tier
    that pairs widens the others', never narrows them."""
    tiers = sorted((t for t, s in states.items() if s.shares), key=tier_sort_key)
    base = states.get(baseline_tier)
    pairs = {t: _pairs(states[t], base) for t in tiers if t != baseline_tier}
    paired = sum(1 for p in pairs.values() if p)
    each = 1 - (1 - confidence) / max(paired, 1)
    for tier in tiers:
        state = states[tier]
        status = state.status(design)
        outcomes = [share.outcomes for share in state.shares.values()]
        rate = suite_pass_rate(outcomes, confidence)
        difference = paired_difference(pairs[tier], each) if tier in pairs else None
        if tier in pairs:
            experiments = difference.experiments if difference else 0
        else:
            experiments = rate.experiments if rate else 0
        yield SuiteTier(
            suite=suite,
            tier=tier,
            experiments=experiments,
            runs=status.runs,
            experiments_with_runs=status.experiments,
            baseline_tier=baseline_tier,
            pass_rate=_estimate(rate),
            pass_rate_difference=_difference(difference),
            difference_confidence=confidence,
            drop=SuiteDrop(dropped=status.dropped, evidence=status.evidence),
        )


def _pairs(state: SuiteState, base: SuiteState | None) -> list[tuple[Outcomes, Outcomes]]:
    """The tier's and the baseline's outcomes in each experiment both have runs with one in."""
    if base is None:
        return []
    common = sorted(state.shares.keys() & base.shares.keys())
    both = [(state.shares[e].outcomes, base.shares[e].outcomes) for e in common]
    return [(t, b) for t, b in both if t.runs and b.runs]


def _estimate(figure: SuiteFigure | None) -> SuiteEstimate | None:
    if figure is None:
        return None
    return SuiteEstimate(estimate=figure.estimate, low=figure.low, high=figure.high)


def _difference(figure: SuiteFigure | None) -> SuiteDifference | None:
    if figure is None:
        return None
    return SuiteDifference(
        estimate=figure.estimate,
        low=figure.low,
        high=figure.high,
        significant=figure.low > 0 or figure.high < 0,
    )
