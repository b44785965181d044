"""A suite tier's report as the suite hop publishes it, for the tests of what reads one."""

from __future__ import annotations

from typing import Any

from schemas.suites import SuiteDifference, SuiteDrop, SuiteEstimate, SuiteTier


def suite_tier(
    suite: str = "agent",
    tier: str = "T1",
    *,
    experiments: int = 3,
    runs: int = 120,
    dropped: bool = False,
    evidence: dict[str, float] | None = None,
    pass_rate: tuple[float, float, float] | None = (0.6, 0.5, 0.7),
    difference: tuple[float, float, float] | None = (0.04, -0.02, 0.1),
    composite: tuple[float, float, float] | None = (0.7, 0.6, 0.8),
    composite_difference: tuple[float, float, float] | None = (0.03, -0.01, 0.07),
    **fields: Any,
) -> SuiteTier:
    """A report; each figure as (estimate, low, high); the baseline (T0) has no difference
    whatever is given."""
    low_high = difference if tier != "T0" else None
    composite_low_high = composite_difference if tier != "T0" else None
    return SuiteTier(
        suite=suite,
        tier=tier,
        experiments=experiments,
        runs=runs,
        experiments_with_runs=fields.pop("experiments_with_runs", experiments),
        baseline_tier="T0",
        pass_rate=None if pass_rate is None else SuiteEstimate(**_figure(pass_rate)),
        pass_rate_difference=_difference(low_high),
        mean_composite=None if composite is None else SuiteEstimate(**_figure(composite)),
        mean_composite_difference=_difference(composite_low_high),
        difference_confidence=0.95,
        drop=SuiteDrop(
            dropped=dropped,
            evidence={"pass_rate": 0.42, "score": 0.1} if evidence is None else evidence,
        ),
        **fields,
    )


def _difference(values: tuple[float, float, float] | None) -> SuiteDifference | None:
    if values is None:
        return None
    return SuiteDifference(**_figure(values), significant=values[1] > 0 or values[2] < 0)


def _figure(values: tuple[float, float, float]) -> dict[str, float]:
    return dict(zip(("estimate", "low", "high"), values, strict=True))
