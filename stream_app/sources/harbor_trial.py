"""One Harbor trial (`jobs/<job>/<trial>/result.json`, Harbor's `TrialResult` as JSON) as a
`run-completed` event: the documented mapping (docs/operations.md, 'From Harbor'), pure, read
from the JSON alone (no Harbor import: it needs Python 3.12 and pulls in litellm). A trial whose
tier, reward or times cannot be found is refused with its reason, never guessed."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from schemas.common import TIER_PATTERN
from schemas.run_completed import MAX_ERROR_CHARS
from schemas.timestamp import format_timestamp
from stream_app.sources.inspect_run import bounded
from stream_app.sources.run_mapping import RunMapping
from stream_app.sources.skipped import NoEvent

REWARD_KEY: Final = "reward"
"""The verifier's reward Harbor's own metrics read; a trial with another single key uses it."""


class Refused(NoEvent):
    """A trial that makes no event."""


def is_trial(result: Any) -> bool:
    """Whether a `result.json` is a trial's (a job's own has no `trial_name`)."""
    return isinstance(result, dict) and "trial_name" in result and "task_name" in result


def agent_and_model(result: Mapping[str, Any]) -> tuple[str, str]:
    """The agent's name, and its model as `provider/name` (the name alone without one)."""
    agent = result.get("agent_info") or {}
    info = agent.get("model_info") or {}
    name, provider = info.get("name"), info.get("provider")
    if not isinstance(name, str) or not name:
        raise Refused("no_model", f"trial {result.get('trial_name')} names no model")
    model = f"{provider}/{name}" if isinstance(provider, str) and provider else name
    return str(agent.get("name") or "agent"), model


def tier_of(agent: str, model: str, tiers: Mapping[str, str]) -> str:
    """The user's tier for `agent/model`, else for the agent, else for the model."""
    for key in (f"{agent}/{model}", agent, model):
        tier = tiers.get(key)
        if tier is not None:
            if not re.fullmatch(TIER_PATTERN, tier):
                raise Refused("bad_tier", f"tier {tier!r} for {key} is not T0 ... T99")
            return tier
    raise Refused(
        "no_tier",
        f"no tier for {agent}/{model}: map it (or the agent, or the model) to a tier with the "
        "`tiers` setting, e.g. EVALSTREAM_TIERS='{\"" + f"{agent}/{model}" + '": "T1"}\'',
    )


def reward_of(result: Mapping[str, Any]) -> float | None:
    """The verifier's reward (None: the trial raised before one)."""
    verifier = result.get("verifier_result") or {}
    rewards = verifier.get("rewards") or {}
    if REWARD_KEY in rewards:
        value = rewards[REWARD_KEY]
    elif len(rewards) == 1:
        value = next(iter(rewards.values()))
    elif result.get("exception_info"):
        return None
    else:
        raise Refused("no_reward", f"trial {result.get('trial_name')} has no reward")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Refused("bad_reward", f"trial {result.get('trial_name')}: reward {value!r:.80}")
    return float(value)


def timestamp(value: Any, what: str) -> str:
    """An RFC 3339 time with an offset; Harbor writes local times without one: read as UTC."""
    if not isinstance(value, str):
        raise Refused("no_times", f"no {what}")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Refused("bad_time", f"{what} {value!r} is not a time") from None
    return format_timestamp(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def run_event(result: Mapping[str, Any], mapping: RunMapping) -> dict[str, Any]:
    """The trial's `run-completed` event (a dict of JSON values); raises `Refused`."""
    agent, model = agent_and_model(result)
    reward = reward_of(result)
    errored = bool(result.get("exception_info"))
    usage = result.get("agent_result") or {}
    cached = int(usage.get("n_cache_tokens") or 0)
    event: dict[str, Any] = {
        "schema_version": 1,
        "run_id": bounded(f"harbor/{result.get('id') or result['trial_name']}"),
        "experiment_id": bounded(str(result["task_name"])),
        "tier": tier_of(agent, model, mapping.tiers),
        "model": bounded(model),
        "suite": bounded(f"{agent}/{model}"),
        "passed": not errored and reward is not None and reward >= mapping.pass_at,
        "judgment": {
            "summary": {
                "weighted_score": 0.0 if reward is None or errored else min(1.0, max(0.0, reward))
            }
        },
        "tokens": {
            "input": max(0, int(usage.get("n_input_tokens") or 0) - cached),  # it counts them
            "output": int(usage.get("n_output_tokens") or 0),
            "cache_read": cached,
        },
        "started_at": timestamp(result.get("started_at"), "started_at"),
        "completed_at": timestamp(result.get("finished_at"), "finished_at"),
    }
    cost = usage.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        event["cost_usd"] = float(cost)
    exception = result.get("exception_info")
    if isinstance(exception, dict):
        said = f"{exception.get('exception_type', '')}: {exception.get('exception_message', '')}"
        event["error"] = said[:MAX_ERROR_CHARS]
    return event
