"""What the tiers of a suite show, made together: each tier's pass rate and mean composite over
the suite's experiments, each one's difference from the baseline paired by experiment (all of a
suite's differences of a figure holding at once), and its drop detectors. The suite hop and
`replay` both report with this."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from schemas.common import tier_sort_key
from schemas.suites import SuiteDifference, SuiteDrop, SuiteEstimate, SuiteTier
from stream_app.core.drop_detector import DropDesign
from stream_app.core.suite.state import SuiteState
from stream_app.metrics.suite_comparison import (
    Paired,
    SuiteFigure,
    closings,
    paired_difference,
    suite_mean,
)
from stream_app.metrics.suite_outcomes import Figure


def suite_tiers(
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
    closed = {t: _closings(states[t]) for t in tiers}  # once a tier: the pairs use them too
    base = states.get(baseline_tier)
    base_closed = closed.get(baseline_tier, {})
    pairs = {
        t: _pairs(states[t], base, closed[t], base_closed) for t in tiers if t != baseline_tier
    }
    paired = sum(1 for p in pairs.values() if p)
    each = 1 - (1 - confidence) / max(paired, 1)
    for tier in tiers:
        state = states[tier]
        status = state.status(design)
        outcomes = [state.shares[e].outcomes for e in closed[tier]]  # by name
        when = list(closed[tier].values())
        rate, composite = (suite_mean(outcomes, confidence, f, when) for f in Figure)
        if tier in pairs:
            difference, composite_difference = (
                paired_difference(pairs[tier], each, f) for f in Figure
            )
            experiments = difference.experiments if difference else 0
        else:
            difference = composite_difference = None
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
            mean_composite=_estimate(composite),
            mean_composite_difference=_difference(composite_difference),
            difference_confidence=confidence,
            drop=SuiteDrop(dropped=status.dropped, evidence=status.evidence),
        )


def _pairs(
    state: SuiteState,
    base: SuiteState | None,
    tier_closed: Mapping[str, int | None],
    base_closed: Mapping[str, int | None],
) -> list[Paired]:
    """The tier's and the baseline's outcomes in each experiment both have runs in (by name),
    and when both had closed (`tier_closed`, `base_closed`: `_closings` of each)."""
    if base is None:
        return []
    out: list[Paired] = []
    for e in sorted(state.shares.keys() & base.shares.keys()):
        tier, baseline = state.shares[e].outcomes, base.shares[e].outcomes
        if tier.runs and baseline.runs:
            t, b = tier_closed[e], base_closed[e]
            out.append(Paired(tier, baseline, None if t is None or b is None else max(t, b)))
    return out


def _closings(state: SuiteState) -> dict[str, int | None]:
    """When each of the tier's experiments closed, by name."""
    names = sorted(state.shares)
    return dict(zip(names, closings([state.shares[e].outcomes for e in names]), strict=True))


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
