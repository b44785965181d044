"""The document `stream-app replay` writes."""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, Field

from schemas.aggregates import TierAggregate
from schemas.common import OUTPUT_MODEL_CONFIG, RejectReason
from schemas.cross_tier import CrossTierReport
from schemas.suites import SuiteTier


class ReplayRejection(BaseModel):
    """One rejected line of the replayed file."""

    model_config = OUTPUT_MODEL_CONFIG

    line: int = Field(description="1-based physical line number.")
    reason: RejectReason
    detail: Any


class IgnoredCounts(BaseModel):
    """Valid events that changed nothing."""

    model_config = OUTPUT_MODEL_CONFIG

    duplicate: int = Field(description="run_id already in its window.")
    late: int = Field(description="Older than every run of its full window.")


class RetiredExperiment(BaseModel):
    """An experiment retired during the replay: no run for `experiment_idle_ttl_s` of event
    time (the latest `completed_at` read). Its runs before `at` left the final state."""

    model_config = OUTPUT_MODEL_CONFIG

    experiment_id: str
    at: AwareDatetime = Field(description="The replay's event time when it retired.")


class SkippedRun(BaseModel):
    """A run (or experiment) directory of a replayed ProjectScylla experiment that made no
    event (`stream-app replay DIR`)."""

    model_config = OUTPUT_MODEL_CONFIG

    path: str = Field(description="The run or experiment directory.")
    reason: str = Field(description="A short code: invalid_json, missing_field, out_of_range, ...")
    detail: str = Field(description="One line: the file and what is wrong with it.")


class ReplayReport(BaseModel):
    """Final state after replaying a file of events."""

    model_config = OUTPUT_MODEL_CONFIG

    tiers: list[TierAggregate] = Field(description="Sorted by experiment, then numeric tier.")
    cross_tier: list[CrossTierReport] = Field(description="Sorted by experiment.")
    suites: list[SuiteTier] = Field(
        default_factory=list, description="Sorted by suite, then numeric tier."
    )
    rejected: list[ReplayRejection]
    ignored: IgnoredCounts
    retired: list[RetiredExperiment] = Field(
        default_factory=list, description="In the order they retired; an id may come back."
    )
    skipped_runs: list[SkippedRun] = Field(
        default_factory=list,
        description="Replaying directories: the malformed runs, each reported once.",
    )
