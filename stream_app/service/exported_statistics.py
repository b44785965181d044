"""The names of the series budget: which statistics of which per-run field `/metrics` exports
per tier, and the default choice. The one definition `settings` (what may be configured) and
`aggregate_collector` (what is written) both read; it imports neither prometheus_client nor
Faust, so loading the settings does not either."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal, get_args

TierField = Literal[
    "pass_rate",
    "impl_rate",
    "composite_score",
    "cost_usd",
    "duration_seconds",
    "cost_of_pass",
    "code_bleu",
    "test_pass_rate",
]
"""A field of `TierAggregate` that holds `Statistics`."""
StatisticName = Literal["median", "mean", "mode", "min", "max", "std_dev"]
"""A statistic of `Statistics`."""
ExportedStatistics = Mapping[TierField, tuple[StatisticName, ...]]
"""Which statistics of each field are exported; a field left out exports none."""

TIER_FIELDS: Final[tuple[TierField, ...]] = get_args(TierField)
STATS: Final[tuple[StatisticName, ...]] = get_args(StatisticName)
DEFAULT_EXPORTED_STATISTICS: Final[ExportedStatistics] = MappingProxyType(
    {
        "pass_rate": ("mean",),
        "impl_rate": ("mean",),
        "composite_score": ("median",),
        "cost_usd": ("median",),
        "duration_seconds": ("median",),
        "cost_of_pass": ("median",),
        "code_bleu": ("median",),
        "test_pass_rate": ("mean",),
    }
)
"""The series budget: one statistic per field, the one the dashboards and alert rules read (a
rate's mean is the share of runs; a score's or cost's median resists outliers). The setting
`exported_statistics` selects others; every statistic is on the aggregates topic and in the
query API whatever is exported."""
