"""evalstream's message contract: pydantic v2 models of every message in and out.

Producers in other languages use the JSON Schemas exported from these models to `schemas/json/`
(regenerate with `python -m schemas.export`).
"""

from schemas.aggregates import Statistics, TierAggregate
from schemas.common import ExtendedFloat, Grade, RejectReason, TierName, tier_sort_key
from schemas.cross_tier import CrossTierReport
from schemas.dead_letter import DeadLetter, MessageOrigin
from schemas.grade_change import GradeChange
from schemas.replay_report import IgnoredCounts, ReplayRejection, ReplayReport
from schemas.run_completed import Judgment, JudgmentSummary, RunCompleted, TokenUsage
from schemas.run_metrics import RunMetrics

__all__ = [
    "CrossTierReport",
    "DeadLetter",
    "ExtendedFloat",
    "Grade",
    "GradeChange",
    "IgnoredCounts",
    "Judgment",
    "JudgmentSummary",
    "MessageOrigin",
    "RejectReason",
    "ReplayRejection",
    "ReplayReport",
    "RunCompleted",
    "RunMetrics",
    "Statistics",
    "TierAggregate",
    "TierName",
    "TokenUsage",
    "tier_sort_key",
]
