"""From raw message bytes to per-run metrics, or to a rejection with a reason.

Validation runs straight from bytes (pydantic's JSON parser), so a message is decoded once; every
failure is a `Rejection`, never an exception, because bad input must not stop the worker. An
exception the core raises on one event (a defect, or an input the contract failed to exclude)
becomes that event's `processing_error`, not the batch's problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from schemas.common import RejectReason
from schemas.dead_letter import (
    DEAD_LETTER_PAYLOAD_CAP,
    DeadLetter,
    MessageOrigin,
    cap_detail,
    encode_payload,
    payload_digest,
)
from schemas.run_completed import RunCompleted
from schemas.run_metrics import RunMetrics
from stream_app.core.config import CoreConfig
from stream_app.metrics.run_metrics import compute_run_metrics


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a message was not accepted; `detail` is JSON-serializable."""

    reason: RejectReason
    detail: Any


def error_text(exc: BaseException) -> str:
    """`Type: message`, on one line and at most 1,000 characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 1000 else text[:999] + "…"


def processing_error(stage: str, exc: BaseException) -> Rejection:
    """The rejection of an event on which the core raised `exc` in `stage`."""
    return Rejection("processing_error", {"stage": stage, "error": error_text(exc)})


def state_error(table: str, exc: BaseException) -> Rejection:
    """The rejection of a stored state that could not be loaded or aggregated."""
    return Rejection("state_error", {"table": table, "error": error_text(exc)})


def parse_run(raw: bytes, max_bytes: int) -> RunCompleted | Rejection:
    """Validate one message against the `RunCompleted` contract."""
    if len(raw) > max_bytes:
        return Rejection("too_large", {"size": len(raw), "limit": max_bytes})
    try:
        return RunCompleted.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        if errors and errors[0]["type"] == "json_invalid":
            return Rejection("invalid_json", {"error": errors[0]["msg"]})
        return Rejection("schema", json.loads(exc.json(include_url=False, include_input=False)))


def evaluate_run(raw: bytes, config: CoreConfig) -> RunMetrics | Rejection:
    """Validate a message and compute its per-run metrics; never raises for the message's sake."""
    try:
        return _evaluate_run(raw, config)
    except Exception as exc:
        return processing_error("validate", exc)


def _evaluate_run(raw: bytes, config: CoreConfig) -> RunMetrics | Rejection:
    parsed = parse_run(raw, config.max_message_bytes)
    if isinstance(parsed, Rejection):
        return parsed
    return compute_run_metrics(
        parsed,
        config.price_table,
        config.composite_weights,
        config.grade_thresholds,
        config.code_bleu.weights,
    )


def make_dead_letter(
    raw: bytes,
    rejection: Rejection,
    origin: MessageOrigin,
    now: datetime | None = None,
    payload_cap: int = DEAD_LETTER_PAYLOAD_CAP,
) -> DeadLetter:
    """The dead letter of a rejected message: its original bytes exactly when they fit
    `payload_cap` as written, else their first bytes with the size and SHA-256 of the whole."""
    payload, encoding, truncated = encode_payload(raw, payload_cap)
    return DeadLetter(
        reason=rejection.reason,
        detail=cap_detail(rejection.detail),
        payload=payload,
        payload_encoding=encoding,
        payload_size=len(raw),
        payload_sha256=payload_digest(raw),
        truncated=truncated,
        origin=origin,
        rejected_at=now or datetime.now(UTC),
    )
