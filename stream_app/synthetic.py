"""Realistic synthetic `run-completed` events for demos, tests, alert checks and load.

Tiers follow the real runs' pass rates and judge scores (`PROFILES`); the named `SCENARIOS` hold
a drop the alerts must page for, or none they must stay silent on (docs/runbooks.md, 'Alert
quality: pages for drops, not for noise'). Better tiers cost more, and a third of the events
carry no `cost_usd` (priced from tokens)."""

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
SUBTESTS: Final = 5
"""Each tier's runs go through its subtests in turn, one run each (epoch by epoch). Few, so
that every subtest is watched early: each needs ten reference runs of its own."""
MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "gpt-4o")


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
SPREAD: Final = (
    Profile((0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35), (0.85, 0.10), (0.30, 0.20)),
    Profile((0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70), (0.85, 0.10), (0.30, 0.20)),
    Profile((0.75, 0.80, 0.85, 0.90, 0.95, 0.50, 0.60), (0.85, 0.10), (0.30, 0.20)),
)
"""Stationary tiers at pass rates 5 % to 95 % in steps of 5 (and two more), with judge scores
spread like the real runs' noisiest experiment."""


@dataclass(frozen=True)
class Drop:
    """From `after` (a fraction of the stream) on, `tier` of `experiment` changes: its pass rate
    to `pass_rate`, its passed and failed runs' judge scores to `passed_score` and
    `failed_score` (mean, standard deviation); None keeps the tier's own."""

    experiment: str = "synthetic-01"
    tier: str = "T5"
    after: float = 0.5
    pass_rate: float | None = 0.15
    passed_score: tuple[float, float] | None = (0.35, 0.10)
    failed_score: tuple[float, float] | None = (0.35, 0.10)

    def applied(self, profile: Profile, level: int) -> tuple[float, Profile]:
        """The dropped tier's pass rate and scores, from those it had."""
        rate = profile.pass_rates[level] if self.pass_rate is None else self.pass_rate
        return rate, Profile(
            profile.pass_rates,
            profile.passed_score if self.passed_score is None else self.passed_score,
            profile.failed_score if self.failed_score is None else self.failed_score,
        )


SCORE_DROP: Final = Drop(pass_rate=None, passed_score=(0.40, 0.10), failed_score=None)
"""The pass rate unchanged, passed runs' judge scores from A-level to D-level composites."""
SCENARIOS: Final[dict[str, tuple[tuple[Profile, ...], Drop | None]]] = {
    "stationary": (PROFILES, None),
    "drop": (PROFILES, Drop()),
    "score-drop": (PROFILES, SCORE_DROP),
    "spread": (SPREAD, None),
}
"""The named scenarios: the tiers' profiles, and the drop each injects."""


def scenario(name: str, tier: str | None = None) -> tuple[tuple[Profile, ...], Drop | None]:
    """The profiles and drop of scenario `name` (KeyError when there is none of that name),
    the drop in `tier`."""
    profiles, drop = SCENARIOS[name]
    return profiles, (drop if drop is None or tier is None else replace(drop, tier=tier))


def synthetic_events(
    count: int,
    *,
    experiments: int = 3,
    seed: int = 7,
    start: datetime | None = None,
    tier_interval_s: float = 1.0,
    drop: Drop | None = None,
    prefix: str = "synthetic",
    profiles: tuple[Profile, ...] = PROFILES,
) -> Iterator[dict[str, Any]]:
    """Plausible runs in any number, round-robin over the tiers of `experiments` experiments
    (experiment k follows `profiles[k % len(profiles)]`), each tier one run per
    `tier_interval_s` of event time; from `drop.after` of the stream on, `drop`'s tier changes
    as it says."""
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
        profile = profiles[number % len(profiles)]
        rate = profile.pass_rates[level]
        if dropped and drop is not None:
            rate, profile = drop.applied(profile, level)
        passed = rnd.random() < rate
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
            "subtest": f"{(i // len(keys)) % SUBTESTS:02d}",
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
