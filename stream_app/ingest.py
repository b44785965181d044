"""From raw message bytes to per-run metrics, or to a rejection with a reason.

Validation runs straight from bytes (pydantic's JSON parser), so a message is decoded once; every
failure is a `Rejection`, never an exception, because bad input must not stop the worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from schemas.common import RejectReason
from schemas.dead_letter import DeadLetter, MessageOrigin, encode_payload
from schemas.run_completed import RunCompleted
from schemas.run_metrics import RunMetrics
from stream_app.config import CoreConfig
from stream_app.metrics.run_metrics import UnknownModelError, compute_run_metrics


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a message was not accepted; `detail` is JSON-serializable."""

    reason: RejectReason
    detail: Any


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
    """Validate a message and compute its per-run metrics."""
    parsed = parse_run(raw, config.max_message_bytes)
    if isinstance(parsed, Rejection):
        return parsed
    try:
        return compute_run_metrics(
            parsed,
            config.price_table,
            config.composite_weights,
            config.grade_thresholds,
            config.code_bleu.weights,
        )
    except UnknownModelError as exc:
        return Rejection("unknown_model", {"model": exc.model, "error": str(exc)})


def make_dead_letter(
    raw: bytes, rejection: Rejection, origin: MessageOrigin, now: datetime | None = None
) -> DeadLetter:
    """The dead letter of a rejected message, carrying its original bytes exactly."""
    payload, encoding = encode_payload(raw)
    return DeadLetter(
        reason=rejection.reason,
        detail=rejection.detail,
        payload=payload,
        payload_encoding=encoding,
        payload_size=len(raw),
        origin=origin,
        rejected_at=now or datetime.now(UTC),
    )
