"""The answers of the worker's query API (`GET /api/experiments…`): the current state of the
experiments without PromQL. Tiers and reports are the very `TierAggregate` and `CrossTierReport`
last published on the output topics."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field

from schemas.aggregates import TierAggregate
from schemas.common import OUTPUT_MODEL_CONFIG, Grade
from schemas.cross_tier import CrossTierReport
from schemas.suites import SuiteTier


class TierSummary(BaseModel):
    """One tier in the experiment list."""

    model_config = OUTPUT_MODEL_CONFIG

    tier: str
    grade: Grade
    runs: int
    capacity: int
    composite_median: float = Field(description="Median composite score of the window.")
    latest_completed_at: AwareDatetime
    dropped: bool = Field(
        default=False, description="A drop detector paged and the tier has not recovered."
    )


class ExperimentSummary(BaseModel):
    """One experiment in `GET /api/experiments`."""

    model_config = OUTPUT_MODEL_CONFIG

    experiment_id: str
    tiers: list[TierSummary] = Field(description="By numeric tier.")
    last_update: AwareDatetime = Field(description="The newest completed_at of its windows.")


class ExperimentList(BaseModel):
    """`GET /api/experiments`: every experiment of every worker, by id."""

    model_config = OUTPUT_MODEL_CONFIG

    experiments: list[ExperimentSummary]
    workers: int = Field(description="Workers that answered (all of the group's).")


class ExperimentDetail(BaseModel):
    """`GET /api/experiments/{id}`: every tier's aggregate and the cross-tier report."""

    model_config = OUTPUT_MODEL_CONFIG

    experiment_id: str
    tiers: list[TierAggregate] = Field(description="By numeric tier.")
    cross_tier: CrossTierReport | None = Field(
        description="Null only for the moment between a first aggregate and its report."
    )


class SuiteList(BaseModel):
    """`GET /api/suites`: every suite tier of every worker, by suite then numeric tier."""

    model_config = OUTPUT_MODEL_CONFIG

    suites: list[SuiteTier]
    workers: int = Field(description="Workers that answered (all of the group's).")


class SuiteDetail(BaseModel):
    """`GET /api/suites/{suite}`: a suite's tiers, each as last published."""

    model_config = OUTPUT_MODEL_CONFIG

    suite: str
    tiers: list[SuiteTier] = Field(description="By numeric tier.")


class ApiError(BaseModel):
    """Any answer that is not 200: one line saying why."""

    model_config = OUTPUT_MODEL_CONFIG

    error: str
