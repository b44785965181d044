"""What the tiers of a suite show, made together: each tier's pass rate and mean composite over
the suite's experiments, each one's difference from the baseline paired by experiment (all of a
suite's differences of a figure holding at once), and its drop detectors. The suite hop and
`replay` both report with this."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

from schemas.common import tier_sort_key
from schemas.suites import SuiteDifference, SuiteDrop, SuiteEstimate, SuiteTier
from stream_app.core.config import CoreConfig
from stream_app.core.drop_detector import DropDesign
from stream_app.core.stored_aggregate import fingerprint
from stream_app.core.suite.comparison import compared
from stream_app.core.suite.state import SuiteState
from stream_app.metrics.suite_comparison import SuiteFigure
from stream_app.metrics.suite_outcomes import Figure

REPORT_FORMAT: Final = 1
"""The version of how a suite tier's report is made from its experiments' shares: raised by any
change of the core or the schemas that changes a published report, so that each worker's next
start publishes its suites again (`report_fingerprint`)."""


def report_fingerprint(config: CoreConfig) -> str:
    """What made a suite's published reports besides its shares: REPORT_FORMAT and the core's
    settings. The suite hop keeps it beside each suite tier's shares, and publishes a suite
    whose tiers were published otherwise again when it starts."""
    return fingerprint(config, f"suite report {REPORT_FORMAT}")


def suite_tiers(
    suite: str,
    states: Mapping[str, SuiteState],
    design: DropDesign,
    baseline_tier: str,
    confidence: float,
) -> Iterator[SuiteTier]:
    """Every tier of `suite` with an experiment left (`states`: its tiers' states), in numeric
    order, one at a time: the suite hop lets the other hops run in between. With m tiers paired
    with the baseline, each difference is at 1 - (1 - confidence) / m (Bonferroni), so that all
    hold at once at every moment: a tier that pairs widens the others', never narrows them.
    Each tier's comparison is brought up to date with what moved since its last report
    (`comparison`), its pairs with its own and the baseline's moves."""
    tiers = sorted((t for t, s in states.items() if s.shares), key=tier_sort_key)
    comparisons = {t: compared(states[t]) for t in tiers}
    base = comparisons.get(baseline_tier)
    for tier in tiers:
        own, changed, before = comparisons[tier]
        if base is None:
            own.paired.clear()
        elif tier != baseline_tier:
            keys = None if changed is None or base[1] is None else changed | base[1]
            own.paired.follow(own, base[0], keys, (before, base[2]))
    paired = sum(1 for t in tiers if t != baseline_tier and comparisons[t][0].paired.pairs)
    each = 1 - (1 - confidence) / max(paired, 1)
    for tier in tiers:
        state, comparison = states[tier], comparisons[tier][0]
        status = state.status(design)
        rate, composite = (comparison.mean(f, confidence) for f in Figure)
        if tier != baseline_tier:
            difference, composite_difference = (
                comparison.paired.difference(f, each) for f in Figure
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
