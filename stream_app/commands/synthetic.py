"""Realistic synthetic `run-completed` events for demos, tests and load: tiers T0-T6 over several
experiments, better tiers passing more often at a higher cost, a third of the events without
`cost_usd` (priced from tokens), and optionally a grade drop injected into one tier."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.run_completed import TokenUsage
from stream_app.metrics.pricing import DEFAULT_PRICING

TIERS = tuple(f"T{i}" for i in range(7))
MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "gpt-4o")


@dataclass(frozen=True)
class GradeDrop:
    """From `after` (a fraction of the stream) on, `tier` of `experiment` mostly fails."""

    experiment: str
    tier: str = "T5"
    after: float = 0.5


def synthetic_events(
    count: int,
    *,
    experiments: int = 3,
    seed: int = 7,
    start: datetime | None = None,
    spacing_s: float = 1.0,
    drop: GradeDrop | None = None,
    prefix: str = "synthetic",
) -> Iterator[dict[str, Any]]:
    """Plausible runs in any number, for load and for a grade drop we know is there.

    Tiers improve with their level; from `drop.after` of the stream on, `drop`'s tier passes
    far less often, so its grade falls.
    """
    rnd = random.Random(seed)
    start = start or datetime.now(UTC)
    keys = [(f"{prefix}-{e + 1:02d}", tier) for e in range(experiments) for tier in TIERS]
    for i in range(count):
        experiment, tier = keys[i % len(keys)]
        level = int(tier[1:])
        dropped = (
            drop is not None
            and experiment == drop.experiment
            and tier == drop.tier
            and i >= drop.after * count
        )
        if dropped:
            p_pass, impl_mean = 0.15, 0.35
        else:
            p_pass, impl_mean = 0.70 + 0.045 * level, 0.72 + 0.035 * level
        passed = rnd.random() < p_pass
        impl = min(1.0, max(0.0, rnd.gauss(impl_mean + (0.05 if passed else -0.15), 0.06)))
        model = MODELS[i % len(MODELS)]
        tokens = {
            "input": rnd.randint(20, 400),
            "output": int(rnd.gauss(600 + 150 * level, 120)) if level else rnd.randint(200, 600),
            "cache_creation": rnd.randint(2_000, 8_000 + 3_000 * level),
            "cache_read": rnd.randint(20_000, 60_000 + 20_000 * level),
        }
        tokens["output"] = max(tokens["output"], 1)
        completed = start + timedelta(seconds=i * spacing_s)
        duration = max(5.0, rnd.gauss(60 + 25 * level, 15))
        event: dict[str, Any] = {
            "schema_version": 1,
            "run_id": f"{experiment}/{tier}/run-{i:08d}",
            "experiment_id": experiment,
            "tier": tier,
            "model": model,
            "subtest": f"{(i // len(keys)) % 25:02d}",
            "run_number": i // len(keys) + 1,
            "passed": passed,
            "judgment": {"summary": {"weighted_score": round(impl, 4)}},
            "tokens": tokens,
            "started_at": (completed - timedelta(seconds=duration)).isoformat(),
            "completed_at": completed.isoformat(),
        }
        if i % 3:  # billed cost present; otherwise the worker prices the tokens
            price = DEFAULT_PRICING[model]
            event["cost_usd"] = round(price.cost_usd(TokenUsage(**tokens)), 8)
        yield event


def synthetic_lines(count: int, **kwargs: Any) -> Iterator[bytes]:
    """`synthetic_events` as the compact JSON lines a producer sends."""
    for event in synthetic_events(count, **kwargs):
        yield json.dumps(event, separators=(",", ":")).encode()
