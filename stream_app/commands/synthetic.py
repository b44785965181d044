"""Realistic synthetic `run-completed` events for demos, tests, alert checks and load.

Two named scenarios (`SCENARIOS`):
- `stationary`: tiers T0-T6 of several experiments whose pass rates and judge scores follow the
  shared real runs (`PROFILES`, measured from ../shared/data/scylla-runs.jsonl): noisy windows,
  no change in any tier. The grade-drop alert must stay silent on it.
- `drop`: the same, and from `GradeDrop.after` (a fraction of the stream) on, one tier mostly
  fails (15 % passes, judge scores around 0.35): a sustained drop the alert must page for.

Each tier gets one run every `tier_interval_s` of event time (1 s: the issue's 1 run/s per tier),
better tiers cost more, and a third of the events carry no `cost_usd` (priced from tokens)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from schemas.run_completed import TokenUsage
from stream_app.metrics.pricing import DEFAULT_PRICING

TIERS = tuple(f"T{i}" for i in range(7))
MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "gpt-4o")


@dataclass(frozen=True)
class GradeDrop:
    """From `after` (a fraction of the stream) on, `tier` of `experiment` mostly fails."""

    experiment: str = "synthetic-01"
    tier: str = "T5"
    after: float = 0.5


@dataclass(frozen=True)
class Profile:
    """One real experiment's runs: each tier's pass rate, and the judge's score of passed and of
    failed runs (mean, standard deviation)."""

    pass_rates: tuple[float, ...]
    passed_score: tuple[float, float]
    failed_score: tuple[float, float]


PROFILES: Final = (
    # test-001, test-002, test-003 of the shared real runs (261 runs each). Observed pass rates of
    # 1.0 (every one of 3 to 123 runs passed) are capped at 0.97: a rate above ~0.97, not a
    # certainty, so that every tier is noisy.
    Profile((0.96, 0.97, 0.97, 0.97, 0.97, 0.97, 0.97), (0.920, 0.022), (0.045, 0.025)),
    Profile((0.90, 0.93, 0.96, 0.97, 0.97, 0.96, 0.97), (0.691, 0.071), (0.399, 0.224)),
    Profile((0.94, 0.97, 0.97, 0.96, 0.95, 0.93, 0.97), (0.848, 0.149), (0.439, 0.192)),
)
DROPPED: Final = Profile((0.15,) * len(TIERS), (0.35, 0.10), (0.35, 0.10))
"""A tier after the injected drop: it mostly fails, and its judge scores fall too."""
SCENARIOS: Final[dict[str, GradeDrop | None]] = {"stationary": None, "drop": GradeDrop()}
"""The named scenarios: the drop each injects."""


def scenario_drop(name: str, tier: str | None = None) -> GradeDrop | None:
    """The drop of scenario `name` (KeyError when there is none of that name), in `tier`."""
    drop = SCENARIOS[name]
    return drop if drop is None or tier is None else replace(drop, tier=tier)


def synthetic_events(
    count: int,
    *,
    experiments: int = 3,
    seed: int = 7,
    start: datetime | None = None,
    tier_interval_s: float = 1.0,
    drop: GradeDrop | None = None,
    prefix: str = "synthetic",
) -> Iterator[dict[str, Any]]:
    """Plausible runs in any number, round-robin over the tiers of `experiments` experiments
    (experiment k follows `PROFILES[k % 3]`), each tier one run per `tier_interval_s` of event
    time; from `drop.after` of the stream on, `drop`'s tier follows `DROPPED`."""
    rnd = random.Random(seed)
    start = start or datetime.now(UTC)
    keys = [(f"{prefix}-{e + 1:02d}", tier, e) for e in range(experiments) for tier in TIERS]
    for i in range(count):
        experiment, tier, number = keys[i % len(keys)]
        level = int(tier[1:])
        dropped = (
            drop is not None
            and experiment == drop.experiment
            and tier == drop.tier
            and i >= drop.after * count
        )
        profile = DROPPED if dropped else PROFILES[number % len(PROFILES)]
        passed = rnd.random() < profile.pass_rates[level]
        mean, spread = profile.passed_score if passed else profile.failed_score
        impl = min(1.0, max(0.0, rnd.gauss(mean, spread)))
        model = MODELS[i % len(MODELS)]
        tokens = {
            "input": rnd.randint(20, 400),
            "output": int(rnd.gauss(600 + 150 * level, 120)) if level else rnd.randint(200, 600),
            "cache_creation": rnd.randint(2_000, 8_000 + 3_000 * level),
            "cache_read": rnd.randint(20_000, 60_000 + 20_000 * level),
        }
        tokens["output"] = max(tokens["output"], 1)
        completed = start + timedelta(seconds=i * tier_interval_s / len(keys))
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
