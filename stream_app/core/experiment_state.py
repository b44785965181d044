"""What the cross-tier stage keeps of one experiment: each tier's medians and cumulative counts,
the only parts of a tier's aggregate that the cross-tier metrics read. Pure; the worker stores it
in a table, as JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

from schemas.common import tier_sort_key
from schemas.cross_tier import CrossTierReport
from stream_app.core.compact_json import dumps
from stream_app.core.keyed_batch import FoldedBatch, KeyedFold
from stream_app.metrics.cross_tier import TierFigures, cross_tier_report

ExperimentTiers = dict[str, TierFigures]
"""Tier name -> that tier's figures."""
_MEDIANS: Final = TierFigures._fields[:4]
_COUNTS: Final = len(TierFigures._fields) - len(_MEDIANS)


def experiment_to_json(tiers: ExperimentTiers) -> bytes:
    """Serialized for the table's changelog."""
    return dumps(tiers)


def experiment_from_json(raw: bytes) -> ExperimentTiers:
    """Load a stored state; raises ValueError (never anything later) when it is not one."""
    try:
        data: Any = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"experiment state is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("experiment state is not a JSON object")
    tiers: ExperimentTiers = {}
    for tier, values in data.items():
        tier_sort_key(tier)  # raises ValueError for a name that is not a tier
        sizes = (len(_MEDIANS), len(TierFigures._fields))
        if not isinstance(values, list) or len(values) not in sizes:
            raise ValueError(
                f"experiment state of {tier} is not {len(_MEDIANS)} medians and maybe "
                f"{_COUNTS} counts"
            )
        medians, counts = values[: len(_MEDIANS)], values[len(_MEDIANS) :]
        composite, pass_rate, impl_rate, cost = medians
        if not all(_median(v) for v in (composite, pass_rate, impl_rate)) or not (
            cost is None or _median(cost)  # None: the tier's window has no priced run
        ):
            raise ValueError(f"experiment state of {tier} has a value that is not a median")
        tiers[tier] = TierFigures(
            float(composite),
            float(pass_rate),
            float(impl_rate),
            None if cost is None else float(cost),
            *_counts(tier, counts),
        )
    return tiers


def _counts(tier: str, counts: list[Any]) -> tuple[int | None, int | None, float | None]:
    """Stored cumulative counts (none in a state from before they were kept), checked."""
    if not counts or counts == [None] * _COUNTS:
        return None, None, None
    runs, passes, composite = counts
    integers = all(isinstance(v, int) and not isinstance(v, bool) for v in (runs, passes))
    if not integers or not 0 <= passes <= runs < 2**53:
        raise ValueError(f"experiment state of {tier} has bad run counts")
    if not _median(composite) or composite > runs:
        raise ValueError(f"experiment state of {tier} has a bad composite sum")
    return runs, passes, float(composite)


def _median(value: Any) -> bool:
    """A stored median: a number >= 0, finite (costs, rates and scores are all finite medians
    unless every run of a tier costs +inf, which the contract's cost bound excludes)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:  # an integer too large for a float overflows, and is no median
        return math.isfinite(value) and value >= 0
    except OverflowError:
        return False


def fold_aggregates(
    aggregates: Sequence[tuple[str, tuple[str, TierFigures | None]]],
    load: Callable[[str], ExperimentTiers | None],
    baseline_tier: str,
    confidence: float = 0.95,
    fresh: Callable[[str], ExperimentTiers] = lambda _: {},
) -> FoldedBatch[str, ExperimentTiers, None, CrossTierReport | None]:
    """A batch of tier aggregates (experiment, (tier, figures)) into their experiments, each
    changed experiment reported once; an exception costs only the aggregate that raised it.
    Figures of None remove the tier (it retired); an experiment left with no tier has no
    report (None): it retired. An experiment without a state, or whose state does not load,
    starts from `fresh`'s."""

    def set_tier(tiers: ExperimentTiers, item: tuple[str, TierFigures | None]) -> tuple[bool, None]:
        tier, medians = item
        if medians is not None:
            tiers[tier] = medians
            return True, None
        return tiers.pop(tier, None) is not None, None

    def report(experiment_id: str, tiers: ExperimentTiers) -> CrossTierReport | None:
        if not tiers:
            return None
        return cross_tier_report(experiment_id, tiers, baseline_tier, confidence)

    return KeyedFold(load, fresh, dict, set_tier, report).run(aggregates)
