"""The document `stream-app backtest --json` writes: the pages the worker's drop detectors
would have raised on a history, and why each tier did or did not page."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, DropDetector
from schemas.replay_report import IgnoredCounts, SkippedRun
from schemas.suites import SuiteTier

BacktestWhy = Literal["warming_up", "no_drop", "paged"]
"""Why a tier has no page, or what it is: `warming_up` (fewer reference runs than
drop_warmup_runs: not monitored), `no_drop` (monitored, never paged), `paged` (at least once)."""


class BacktestDesign(BaseModel):
    """The drop detectors' design in force: what a backtest checks before anyone is paged."""

    model_config = OUTPUT_MODEL_CONFIG

    false_page_runs: float = Field(description="drop_false_page_runs.")
    smallest_fall: float = Field(description="drop_smallest_fall.")
    warmup_runs: int = Field(description="drop_warmup_runs.")
    reference_z: float = Field(description="drop_reference_z.")
    reference_runs: int = Field(description="drop_reference_runs.")
    thresholds: dict[DropDetector, float] = Field(
        description="Each detector's threshold: its statistic pages at this value."
    )


class BacktestPage(BaseModel):
    """A page the worker would have raised: TierDropped (scope "experiment") or SuiteTierDropped
    (scope "suite", with no experiment)."""

    model_config = OUTPUT_MODEL_CONFIG

    line: int = Field(
        description="The run whose arrival raised the page: its 1-based physical line in the "
        "file, or for directories its position in window order."
    )
    scope: Literal["experiment", "suite"]
    suite: str
    experiment_id: str | None
    tier: str
    run_id: str
    detector: DropDetector


class BacktestTier(BaseModel):
    """One tier at the end of the history."""

    model_config = OUTPUT_MODEL_CONFIG

    experiment_id: str
    tier: str
    runs: int = Field(description="Accepted runs (the tier's totals).")
    reference_runs: int = Field(description="Runs the reference learned from.")
    monitoring: bool = Field(description="The warm-up is over: the detectors run.")
    monitored_runs: int = Field(description="Accepted runs the detectors have seen.")
    dropped: bool = Field(description="A page is still in effect at the end.")
    pass_rate_reference: float
    score_reference: float
    watched: list[DropDetector] = Field(
        description="The detectors that can see a fall now (a reference at 0 cannot fall)."
    )
    evidence: dict[DropDetector, float] = Field(
        description="Each detector's evidence at the end as a fraction of its threshold on a "
        "log scale, log(1 + R) / log(1 + threshold); 1 pages."
    )
    pages: int
    why: BacktestWhy


class BacktestReport(BaseModel):
    """Every page the worker would have raised on the history, in input order, and every tier's
    detectors at its end."""

    model_config = OUTPUT_MODEL_CONFIG

    design: BacktestDesign
    runs: int = Field(
        description="Events read: non-blank lines of the file, or finished runs of the "
        "directories (accepted, rejected or ignored)."
    )
    rejected: int = Field(description="Events rejected (see `stream-app replay` for why).")
    ignored: IgnoredCounts
    skipped_runs: list[SkippedRun] = Field(
        default_factory=list,
        description="Backtesting directories: the malformed runs, each reported once.",
    )
    pages: list[BacktestPage] = Field(description="By line.")
    tiers: list[BacktestTier] = Field(description="Sorted by experiment, then numeric tier.")
    suites: list[SuiteTier] = Field(
        default_factory=list, description="Sorted by suite, then numeric tier."
    )
    notes: list[str] = Field(
        default_factory=list,
        description="What about the history weakens the detectors' guarantees: runs of the same "
        "subtest back to back (docs/statistics.md).",
    )
