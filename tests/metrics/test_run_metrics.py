import json
import math
from datetime import timedelta

import pytest

from schemas import RunCompleted
from stream_app.metrics.pricing import DEFAULT_PRICING, ModelPrice, find_price
from stream_app.metrics.run_metrics import (
    CompositeWeights,
    composite_score,
    compute_run_metrics,
    cost_of_pass,
)
from tests.helpers import SAMPLE_FILE, make_event, require_module


def run(**overrides: object) -> RunCompleted:
    return RunCompleted.model_validate(make_event(**overrides), strict=False)


def test_seed_example_1_single_run() -> None:
    m = compute_run_metrics(
        run(passed=True, judgment={"summary": {"weighted_score": 0.85}}, cost_usd=0.50),
        DEFAULT_PRICING,
    )
    assert m.pass_rate == 1.0
    assert m.impl_rate == 0.85
    assert m.cost_of_pass == 0.50
    assert m.composite_score == pytest.approx(0.925)
    assert m.grade == "B"
    assert m.cost_source == "event"
    assert m.duration_seconds == 60.0


def test_failed_run_costs_infinity_per_pass() -> None:
    m = compute_run_metrics(run(passed=False), DEFAULT_PRICING)
    assert m.pass_rate == 0.0
    assert m.cost_of_pass == math.inf
    assert cost_of_pass(0.0, 0.0) == math.inf


def test_cost_from_tokens_with_default_cache_multipliers() -> None:
    tokens = {
        "input": 1_000_000,
        "output": 1_000_000,
        "cache_creation": 1_000_000,
        "cache_read": 1_000_000,
    }
    m = compute_run_metrics(
        run(cost_usd=None, model="claude-sonnet-4", tokens=tokens), DEFAULT_PRICING
    )
    # 3 + 15 + 1.25·3 + 0.1·3
    assert m.cost_usd == pytest.approx(22.05)
    assert m.cost_source == "pricing"


def test_seed_pricing_table() -> None:
    one_m = {"input": 1_000_000, "output": 0}
    for model, price in {"claude-opus-4-5": 15.0, "claude-sonnet-4": 3.0, "gpt-4o": 5.0}.items():
        assert (
            compute_run_metrics(
                run(cost_usd=None, model=model, tokens=one_m), DEFAULT_PRICING
            ).cost_usd
            == price
        )
    outs = {"claude-opus-4-5": 75.0, "claude-sonnet-4": 15.0, "gpt-4o": 15.0}
    for model, price in outs.items():
        tokens = {"input": 0, "output": 1_000_000}
        assert (
            compute_run_metrics(
                run(cost_usd=None, model=model, tokens=tokens), DEFAULT_PRICING
            ).cost_usd
            == price
        )


def test_table_prices_reproduce_the_billed_cost_of_real_runs() -> None:
    # The real runs carry the billed cost; pricing their tokens must give the same figure.
    for line in SAMPLE_FILE.read_text().splitlines()[:50]:
        event = json.loads(line)
        billed = event["cost_usd"]
        priced = compute_run_metrics(run(**{**event, "cost_usd": None}), DEFAULT_PRICING).cost_usd
        assert priced == pytest.approx(billed, rel=1e-9)


def test_explicit_cache_prices_override_multipliers() -> None:
    table = {"m": ModelPrice(input=2, output=4, cache_write=1, cache_read=0.5)}
    tokens = {"input": 0, "output": 0, "cache_creation": 1_000_000, "cache_read": 2_000_000}
    assert compute_run_metrics(run(cost_usd=None, model="m", tokens=tokens), table).cost_usd == 2.0


def test_a_model_no_source_prices_is_unpriced_not_free_and_its_own_cost_prices_it() -> None:
    unpriced = compute_run_metrics(run(cost_usd=None, model="not-a-model"), DEFAULT_PRICING)
    assert (unpriced.cost_usd, unpriced.cost_of_pass, unpriced.cost_source) == (
        None,
        None,
        "unpriced",
    )
    assert unpriced.pass_rate == 1.0
    assert unpriced.grade == "B"
    failed = compute_run_metrics(run(cost_usd=None, model="not-a-model", passed=False), {})
    assert failed.cost_of_pass is None  # unknown, not the +inf of a priced failure
    own = compute_run_metrics(run(cost_usd=1.5, model="not-a-model"), DEFAULT_PRICING)
    assert (own.cost_usd, own.cost_source) == (1.5, "event")


def test_model_lookup_is_case_insensitive_and_ignores_snapshot_dates() -> None:
    assert find_price("Claude-Sonnet-4", DEFAULT_PRICING) == DEFAULT_PRICING["claude-sonnet-4"]
    assert (
        find_price("claude-sonnet-4-20250514", DEFAULT_PRICING)
        == DEFAULT_PRICING["claude-sonnet-4"]
    )
    assert find_price("claude-sonnet-9", DEFAULT_PRICING) is None


def test_a_model_the_table_lacks_is_priced_at_the_catalogs_base_rates() -> None:
    """genai-prices' tiers are per request: a run's 1M input tokens are many requests, each
    under the 128K tier, so the base rate applies (genai-prices' own sum would double it)."""
    require_module("genai_prices", "prices")
    from genai_prices import Usage, calc_price

    one_m = {"input": 1_000_000, "output": 0}
    event = run(cost_usd=None, model="google/gemini-1.5-pro", tokens=one_m)
    m = compute_run_metrics(event, DEFAULT_PRICING)
    assert m.cost_source == "catalog"
    assert m.cost_usd == pytest.approx(1.25)
    whole = calc_price(Usage(input_tokens=1_000_000), "gemini-1.5-pro").total_price
    assert float(whole) == pytest.approx(2.5)  # its tier, applied to the run's total
    nonesuch = compute_run_metrics(run(cost_usd=None, model="acme/nonesuch-7"), DEFAULT_PRICING)
    assert (nonesuch.cost_usd, nonesuch.cost_source) == (None, "unpriced")


def test_a_harness_provider_prefix_is_looked_past() -> None:
    """inspect_ai names models `provider/model`; a user's own key with the prefix wins."""
    sonnet = DEFAULT_PRICING["claude-sonnet-4-5"]
    assert find_price("anthropic/claude-sonnet-4-5-20250929", DEFAULT_PRICING) == sonnet
    assert find_price("openrouter/anthropic/claude-sonnet-4-5", DEFAULT_PRICING) == sonnet
    own = {**DEFAULT_PRICING, "bedrock/claude-sonnet-4-5": ModelPrice(input=1.0, output=2.0)}
    assert find_price("Bedrock/claude-sonnet-4-5", own) == own["bedrock/claude-sonnet-4-5"]
    assert find_price("anthropic/claude-sonnet-9", DEFAULT_PRICING) is None


def test_composite_weights() -> None:
    assert composite_score(1.0, 0.5) == 0.75
    assert composite_score(1.0, 0.5, CompositeWeights(pass_rate=3, impl_rate=1)) == 0.875
    assert composite_score(0.0, 0.8, CompositeWeights(pass_rate=0, impl_rate=1)) == 0.8
    with pytest.raises(ValueError, match="both be 0"):
        CompositeWeights(pass_rate=0, impl_rate=0)


def test_duration_is_exact_across_offsets() -> None:
    r = run(started_at="2026-01-05T10:00:00+01:00", completed_at="2026-01-05T09:00:01.5Z")
    assert compute_run_metrics(r, DEFAULT_PRICING).duration_seconds == 1.5
    assert r.completed_at - r.started_at == timedelta(seconds=1.5)
