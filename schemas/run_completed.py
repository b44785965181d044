"""The input event: one finished evaluation run, as published on the `run-completed` topic."""

from __future__ import annotations

from typing import Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.common import TierName
from schemas.timestamp import Timestamp

MAX_TOKENS: Final = 10**12
"""Token counts (and test counts, run numbers) above a trillion are rejected: no real run comes near
it, and every sum and product of such counts stays exact in a float."""
MAX_COST_USD: Final = 1_000_000.0
"""A billed cost above a million USD for one run is rejected: far above any real run, and small
enough that no sum or spread of a window's costs can leave the float range."""
MAX_CODE_BYTES: Final = 200_000
MAX_ERROR_CHARS: Final = 2_000
"""An errored run's message is kept to this many characters (a traceback is not)."""

_INPUT_CONFIG: Final = ConfigDict(
    strict=True,  # no "1" for 1, no 0/1 for booleans
    allow_inf_nan=False,  # NaN and Infinity literals are rejected, never clamped
    extra="ignore",  # producers may add fields; unknown ones are ignored
    frozen=True,
)


class JudgmentSummary(BaseModel):
    """The judges' consensus."""

    model_config = _INPUT_CONFIG

    weighted_score: float = Field(
        ge=0.0, le=1.0, description="Weighted requirement satisfaction, within [0, 1]."
    )


class Judgment(BaseModel):
    """The judge's verdict on a run."""

    model_config = _INPUT_CONFIG

    summary: JudgmentSummary


class TokenUsage(BaseModel):
    """Tokens billed for the run."""

    model_config = _INPUT_CONFIG

    input: int = Field(ge=0, le=MAX_TOKENS)
    output: int = Field(ge=0, le=MAX_TOKENS)
    cache_creation: int = Field(default=0, ge=0, le=MAX_TOKENS)
    cache_read: int = Field(default=0, ge=0, le=MAX_TOKENS)


class CodeSample(BaseModel):
    """The generated code and the reference it is scored against (CodeBLEU)."""

    model_config = _INPUT_CONFIG

    candidate: str = Field(description="Generated code, at most 200 kB of UTF-8.")
    reference: str = Field(description="Reference solution, at most 200 kB of UTF-8.")
    language: str = Field(default="python", pattern=r"^[a-z][a-z0-9_+#-]{0,31}$")

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        for side in ("candidate", "reference"):
            size = len(getattr(self, side).encode("utf-8", "surrogatepass"))
            if size > MAX_CODE_BYTES:
                raise ValueError(f"code.{side} is {size} bytes; at most {MAX_CODE_BYTES}")
        return self


class TestCounts(BaseModel):
    """Outcome of the run's test suite."""

    model_config = _INPUT_CONFIG
    __test__ = False  # not a pytest test class

    passed: int = Field(ge=0, le=MAX_TOKENS)
    failed: int = Field(ge=0, le=MAX_TOKENS)
    errors: int = Field(default=0, ge=0, le=MAX_TOKENS)
    skipped: int = Field(default=0, ge=0, le=MAX_TOKENS)


class RunCompleted(BaseModel):
    """A `run-completed` event. `run_id` is the idempotency key: a re-sent `run_id` is a duplicate
    whatever its content, so producers must never reuse one for a different run."""

    model_config = _INPUT_CONFIG

    schema_version: Literal[1] = Field(default=1, description="Only version 1 exists.")
    run_id: str = Field(min_length=1, max_length=200, description="The idempotency key.")
    experiment_id: str = Field(default="default", min_length=1, max_length=200)
    tier: TierName = Field(description="`T0` … `T99`; sorted numerically.")
    model: str = Field(
        min_length=1, max_length=200, description="The model; key of the pricing table."
    )
    subtest: str | None = Field(default=None, max_length=200)
    suite: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The suite: experiments of one agent watched together. Default: `model`.",
    )
    run_number: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    passed: bool
    judgment: Judgment
    tokens: TokenUsage
    cost_usd: float | None = Field(
        default=None,
        ge=0.0,
        le=MAX_COST_USD,
        description="Billed cost in USD, at most 1e6; when absent it is priced from tokens.",
    )
    started_at: Timestamp = Field(description="RFC 3339 date-time with an offset.")
    completed_at: Timestamp = Field(description="RFC 3339 date-time with an offset; >= started_at.")
    code: CodeSample | None = Field(default=None, description="Scored with CodeBLEU when present.")
    tests: TestCounts | None = Field(default=None, description="Gives the test pass rate.")
    error: str | None = Field(
        default=None,
        max_length=MAX_ERROR_CHARS,
        description="Why the run errored, as its harness said (an errored run is a failed run).",
    )

    @model_validator(mode="after")
    def _completed_not_before_started(self) -> Self:
        if self.completed_at < self.started_at:
            raise ValueError("completed_at is before started_at")
        return self
