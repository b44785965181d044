"""What the cross-tier stage keeps of one experiment: each tier's medians, the only part of a tier's
aggregate that the cross-tier metrics read. Pure; the worker stores it in a table, as JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from schemas.common import tier_sort_key
from schemas.cross_tier import CrossTierReport
from stream_app.core.keyed_batch import FoldedBatch, KeyedFold
from stream_app.metrics.cross_tier import TierMedians, cross_tier_report_from_medians

ExperimentTiers = dict[str, TierMedians]
"""Tier name -> that tier's medians."""


def medians_of_aggregate(aggregate: Mapping[str, Any]) -> TierMedians:
    """A tier's medians, read from its `TierAggregate` as JSON (what the windows stage sends)."""
    return TierMedians(*(float(aggregate[name]["median"]) for name in TierMedians._fields))


def experiment_to_json(tiers: ExperimentTiers) -> bytes:
    """Serialized for the table's changelog."""
    return json.dumps(tiers, separators=(",", ":")).encode()


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
        if not isinstance(values, list) or len(values) != len(TierMedians._fields):
            raise ValueError(
                f"experiment state of {tier} is not {len(TierMedians._fields)} medians"
            )
        if not all(_median(v) for v in values):
            raise ValueError(f"experiment state of {tier} has a value that is not a median")
        tiers[tier] = TierMedians(*(float(v) for v in values))
    return tiers


def _median(value: Any) -> bool:
    """A stored median: a number >= 0, finite (costs, rates and scores are all finite medians
    unless every run of a tier costs +inf, which the contract's cost bound excludes)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def fold_aggregates(
    aggregates: Sequence[tuple[str, tuple[str, TierMedians | None]]],
    load: Callable[[str], ExperimentTiers | None],
    baseline_tier: str,
) -> FoldedBatch[str, ExperimentTiers, None, CrossTierReport | None]:
    """A batch of tier aggregates (experiment, (tier, medians)) into their experiments, each
    changed experiment reported once; an exception costs only the aggregate that raised it.
    Medians of None remove the tier (it retired); an experiment left with no tier has no
    report (None): it retired."""

    def set_tier(tiers: ExperimentTiers, item: tuple[str, TierMedians | None]) -> tuple[bool, None]:
        tier, medians = item
        if medians is not None:
            tiers[tier] = medians
            return True, None
        return tiers.pop(tier, None) is not None, None

    def report(experiment_id: str, tiers: ExperimentTiers) -> CrossTierReport | None:
        if not tiers:
            return None
        return cross_tier_report_from_medians(experiment_id, tiers, baseline_tier)

    return KeyedFold(load, lambda _: {}, dict, set_tier, report).run(aggregates)
