"""evalstream's message contract: pydantic v2 models of every message in and out.

Producers in other languages use the JSON Schemas exported from these models to `schemas/json/`
(regenerate with `python -m schemas.export`).
"""

from schemas.aggregates import Statistics, TierAggregate
from schemas.backtest_report import BacktestDesign, BacktestPage, BacktestReport, BacktestTier
from schemas.code_quality import FunctionalCorrectnessMetrics, SemanticClosenessMetrics
from schemas.common import ExtendedFloat, Grade, RejectReason, TierName, tier_sort_key
from schemas.cross_tier import CrossTierReport
from schemas.dead_letter import DeadLetter, MessageOrigin
from schemas.grade_change import GradeChange
from schemas.query_api import (
    ApiError,
    ExperimentDetail,
    ExperimentList,
    ExperimentSummary,
    SuiteDetail,
    SuiteList,
    TierSummary,
)
from schemas.replay_report import IgnoredCounts, ReplayRejection, ReplayReport, RetiredExperiment
from schemas.run_bundle import RunBundle, bundle_runs
from schemas.run_completed import (
    CodeSample,
    Judgment,
    JudgmentSummary,
    RunCompleted,
    TestCounts,
    TokenUsage,
)
from schemas.run_metrics import RunMetrics
from schemas.suite_feed import SuiteFeedMessage
from schemas.suites import SuiteDrop, SuiteTier

__all__ = [
    "ApiError",
    "BacktestDesign",
    "BacktestPage",
    "BacktestReport",
    "BacktestTier",
    "CodeSample",
    "CrossTierReport",
    "DeadLetter",
    "ExperimentDetail",
    "ExperimentList",
    "ExperimentSummary",
    "ExtendedFloat",
    "FunctionalCorrectnessMetrics",
    "Grade",
    "GradeChange",
    "IgnoredCounts",
    "Judgment",
    "JudgmentSummary",
    "MessageOrigin",
    "RejectReason",
    "ReplayRejection",
    "ReplayReport",
    "RetiredExperiment",
    "RunBundle",
    "RunCompleted",
    "RunMetrics",
    "SemanticClosenessMetrics",
    "Statistics",
    "SuiteDetail",
    "SuiteDrop",
    "SuiteFeedMessage",
    "SuiteList",
    "SuiteTier",
    "TestCounts",
    "TierAggregate",
    "TierName",
    "TierSummary",
    "TokenUsage",
    "bundle_runs",
    "tier_sort_key",
]
