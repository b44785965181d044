"""One inspect_ai sample (one epoch of it) as a `run-completed` event: the documented mapping
(docs/operations.md, 'From inspect_ai'), pure, so that the log reader and the hook publish the
same event for the same sample. A sample whose tier, score or times cannot be found is refused
with its reason, never guessed."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from schemas.common import TIER_PATTERN
from schemas.run_completed import MAX_ERROR_CHARS
from stream_app.sources.run_mapping import RunMapping
from stream_app.sources.skipped import NoEvent

RUN_ID_PREFIX: Final = "inspect"
MAX_ID_CHARS: Final = 200
"""The schema's bound on `run_id` and `experiment_id`: longer names keep a digest instead."""


class Refused(NoEvent):
    """A sample that makes no event."""


@dataclass(frozen=True)
class EvalHeader:
    """What every sample of one eval shares (inspect_ai's `EvalSpec`)."""

    eval_id: str
    task: str
    task_args: Mapping[str, Any]
    model: str
    metadata: Mapping[str, Any]
    eval_set_id: str | None = None


@dataclass(frozen=True)
class SampleResult:
    """One finished sample and epoch: its scores as numbers (inspect_ai's `value_to_float`),
    the evaluated model's usage, its times (RFC 3339) and its error, if any."""

    sample_id: str | int
    epoch: int
    scores: Mapping[str, float]
    usage: Mapping[str, int | float | None]
    started_at: str | None
    completed_at: str | None
    error: str | None = None
    uuid: str | None = None
    """inspect_ai's id of this execution of the sample: kept when a retry reuses the sample,
    new when it runs it again."""


def tier_of(header: EvalHeader, mapping: RunMapping) -> str:
    """The eval's tier: its metadata's `tier`, else the user's tier for its model."""
    tier = header.metadata.get("tier") if header.metadata else None
    if tier is None:
        tier = mapping.tiers.get(header.model)
    if tier is None:
        raise Refused(
            "no_tier",
            f"eval {header.eval_id} ({header.task}, {header.model}) names no tier: run it with "
            "--metadata tier=T<n>, or map its model to a tier",
        )
    if not isinstance(tier, str) or not re.fullmatch(TIER_PATTERN, tier):
        raise Refused("bad_tier", f"eval {header.eval_id}: tier {tier!r} is not T0 ... T99")
    return tier


def experiment_of(header: EvalHeader) -> str:
    """The task, with the arguments it was given (those differing from its defaults)."""
    if not header.task_args:
        return bounded(header.task)
    args = ", ".join(
        f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(header.task_args.items())
    )
    return bounded(f"{header.task}({args})")


def run_id_of(header: EvalHeader, sample: SampleResult) -> str:
    """One id per execution of a sample and epoch, the hook's and the log reader's alike:
    `inspect/<sample>/<epoch>/<uuid>`, the uuid inspect_ai's id of the execution. A retry
    (`eval_retry`, `eval_set`'s) runs under a new eval_id, keeps the uuids of the samples it
    reuses (one run, whichever log holds it) and gives new ones to those it runs again (a run
    of their own: the errored attempt stays a failed run)."""
    if sample.uuid is None:  # a log that keeps none: the eval's own run of it
        return bounded(f"{RUN_ID_PREFIX}/{header.eval_id}/{sample.sample_id}/{sample.epoch}")
    return bounded(f"{RUN_ID_PREFIX}/{sample.sample_id}/{sample.epoch}/{sample.uuid}")


def bounded(name: str) -> str:
    """`name`, or its head and a digest of it when longer than the schema allows."""
    if len(name) <= MAX_ID_CHARS:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[: MAX_ID_CHARS - 17]}~{digest}"


def score_of(sample: SampleResult, mapping: RunMapping) -> float | None:
    """The chosen scorer's value (None: the sample errored before any score)."""
    if not sample.scores:
        if sample.error is not None:
            return None
        raise Refused("no_score", f"sample {sample.sample_id} epoch {sample.epoch} has no score")
    name = mapping.scorer if mapping.scorer is not None else next(iter(sample.scores))
    if name not in sample.scores:
        raise Refused("no_score", f"sample {sample.sample_id} has no score {name!r}")
    return sample.scores[name]


def run_event(header: EvalHeader, sample: SampleResult, mapping: RunMapping) -> dict[str, Any]:
    """The sample's `run-completed` event (a dict of JSON values); raises `Refused`."""
    if sample.started_at is None or sample.completed_at is None:
        raise Refused("no_times", f"sample {sample.sample_id} epoch {sample.epoch} has no times")
    score = score_of(sample, mapping)
    passed = sample.error is None and score is not None and score >= mapping.pass_at
    weighted = 0.0 if score is None or sample.error is not None else min(1.0, max(0.0, score))
    usage = sample.usage
    event: dict[str, Any] = {
        "schema_version": 1,
        "run_id": run_id_of(header, sample),
        "experiment_id": experiment_of(header),
        "tier": tier_of(header, mapping),
        "model": bounded(header.model),
        "suite": bounded(header.eval_set_id or header.model),
        "subtest": bounded(str(sample.sample_id)),
        "run_number": sample.epoch,
        "passed": passed,
        "judgment": {"summary": {"weighted_score": weighted}},
        "tokens": {
            "input": int(usage.get("input_tokens") or 0),
            "output": int(usage.get("output_tokens") or 0),
            "cache_creation": int(usage.get("input_tokens_cache_write") or 0),
            "cache_read": int(usage.get("input_tokens_cache_read") or 0),
        },
        "started_at": sample.started_at,
        "completed_at": sample.completed_at,
    }
    cost = usage.get("total_cost")
    if cost is not None:
        event["cost_usd"] = float(cost)
    if sample.error is not None:
        event["error"] = sample.error[:MAX_ERROR_CHARS]
    return event
