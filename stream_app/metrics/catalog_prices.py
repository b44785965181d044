"""Prices of models the table lacks, from genai-prices (MIT; the `prices` extra, pinned): the
base per-million-token rates in effect when the run completed, from the snapshot bundled with
the package (its updater is never started, so no lookup leaves the machine and `replay` prices
as the worker does). Its long-context tiers are never applied: they are per request, and a run's
tokens are the sum of many requests (applied to a run's total, they doubled a sample run's cost).
A cache write it lists no price for costs the input price; a cache read, too."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any

from stream_app.metrics.pricing import ModelPrice


def catalog_price(model: str, at: datetime) -> ModelPrice | None:
    """The model's base rates at `at` (None: genai-prices is not installed, or lacks it). A
    `provider/name` model is looked up as that provider's first, then by its name alone."""
    found = _find(model.strip().lower())
    if found is None:
        return None
    prices = found.get_prices(at)
    rates = {
        key: _base(getattr(prices, f"{key}_mtok", None))
        for key in ("input", "output", "cache_write", "cache_read")
    }
    if rates["input"] is None or rates["output"] is None:
        return None
    return ModelPrice(
        input=float(rates["input"]),
        output=float(rates["output"]),
        cache_write=float(rates["cache_write"] or rates["input"]),
        cache_read=float(rates["cache_read"] or rates["input"]),
    )


@cache
def _find(model: str) -> Any:
    """genai-prices' model for a name (cached: the snapshot is fixed for the process)."""
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return None
    snapshot = data_snapshot.get_snapshot()
    provider, _, name = model.rpartition("/")
    for ref, provider_id in ((name, provider.rsplit("/", 1)[-1] or None), (name, None)):
        try:
            return snapshot.find_provider_model(ref, None, provider_id, None)[1]
        except LookupError:
            continue
    return None


def _base(price: Any) -> Decimal | None:
    """A rate, or a tiered rate's base (its tiers are per request)."""
    if price is None:
        return None
    return price if isinstance(price, Decimal) else Decimal(price.base)
