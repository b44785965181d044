"""Message keys of the internal and output topics, defined once."""

from __future__ import annotations


def tier_key(experiment_id: str, tier: str) -> str:
    """The key of a tier, `experiment_id/tier`: tiers have no slash, so it splits back."""
    return f"{experiment_id}/{tier}"


def split_tier_key(key: str) -> tuple[str, str]:
    """`tier_key`'s inverse: (experiment_id, tier)."""
    experiment_id, _, tier = key.rpartition("/")
    return experiment_id, tier


def suite_key(suite: str, tier: str) -> str:
    """The key of a suite's tier, `suite/tier`: tiers have no slash, so it splits back."""
    return f"{suite}/{tier}"


def split_suite_key(key: str) -> tuple[str, str]:
    """`suite_key`'s inverse: (suite, tier)."""
    suite, _, tier = key.rpartition("/")
    return suite, tier
