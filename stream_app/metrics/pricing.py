"""Cost of a run from its tokens, and the default price table.

Prices are USD per 1M tokens. Cache writes default to 1.25x and cache reads to 0.1x the input
price (Anthropic's published multipliers) unless a model's entry gives them. The seed's three
models keep the seed's figures; the others are vendors' public list prices at the time of writing
(standard context, no batch discount). Anything can be overridden or added in the config file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from schemas.run_completed import TokenUsage

CACHE_WRITE_MULTIPLIER: Final = 1.25
CACHE_READ_MULTIPLIER: Final = 0.1
_DATE_SUFFIX: Final = re.compile(r"[-@]\d{8}$")


MAX_PRICE: Final = 1_000_000.0
"""USD per 1M tokens, at most: with the contract's token bound every priced cost stays finite."""


class ModelPrice(BaseModel):
    """USD per 1M tokens of one model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0, le=MAX_PRICE, allow_inf_nan=False)
    output: float = Field(ge=0, le=MAX_PRICE, allow_inf_nan=False)
    cache_write: float | None = Field(default=None, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    cache_read: float | None = Field(default=None, ge=0, le=MAX_PRICE, allow_inf_nan=False)

    def cost_usd(self, tokens: TokenUsage) -> float:
        """(input·p_in + output·p_out + cache_creation·p_cw + cache_read·p_cr) / 1e6."""
        cache_write = (
            self.cache_write
            if self.cache_write is not None
            else CACHE_WRITE_MULTIPLIER * self.input
        )
        cache_read = (
            self.cache_read if self.cache_read is not None else CACHE_READ_MULTIPLIER * self.input
        )
        return (
            tokens.input * self.input
            + tokens.output * self.output
            + tokens.cache_creation * cache_write
            + tokens.cache_read * cache_read
        ) / 1e6


def _p(
    input_: float, output: float, cache_write: float | None = None, cache_read: float | None = None
) -> ModelPrice:
    return ModelPrice(input=input_, output=output, cache_write=cache_write, cache_read=cache_read)


DEFAULT_PRICING: Final[Mapping[str, ModelPrice]] = {
    # Seed 001's table.
    "claude-opus-4-5": _p(15.00, 75.00),
    "claude-sonnet-4": _p(3.00, 15.00),
    "gpt-4o": _p(5.00, 15.00),
    # Anthropic (cache multipliers 1.25x / 0.1x).
    "claude-opus-4-1": _p(15.00, 75.00),
    "claude-opus-4": _p(15.00, 75.00),
    "claude-sonnet-4-5": _p(3.00, 15.00),
    "claude-3-7-sonnet": _p(3.00, 15.00),
    "claude-haiku-4-5": _p(1.00, 5.00),
    "claude-3-5-haiku": _p(0.80, 4.00),
    # OpenAI (no cache-write charge; cached input at the published discount).
    "gpt-4o-mini": _p(0.15, 0.60, cache_write=0.15, cache_read=0.075),
    "gpt-4.1": _p(2.00, 8.00, cache_write=2.00, cache_read=0.50),
    "gpt-4.1-mini": _p(0.40, 1.60, cache_write=0.40, cache_read=0.10),
    "gpt-5": _p(1.25, 10.00, cache_write=1.25, cache_read=0.125),
    "gpt-5-mini": _p(0.25, 2.00, cache_write=0.25, cache_read=0.025),
    "o3": _p(2.00, 8.00, cache_write=2.00, cache_read=0.50),
    "o4-mini": _p(1.10, 4.40, cache_write=1.10, cache_read=0.275),
    # Google (standard context).
    "gemini-2.5-pro": _p(1.25, 10.00, cache_write=1.25, cache_read=0.31),
    "gemini-2.5-flash": _p(0.30, 2.50, cache_write=0.30, cache_read=0.075),
}


def normalize_model_name(model: str) -> str:
    """Pricing keys are case-insensitive."""
    return model.strip().lower()


def find_price(model: str, table: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The model's price: exact (case-insensitive) name first, then without a dated snapshot
    suffix, so `claude-sonnet-4-20250514` is priced as `claude-sonnet-4`; then the same without
    a harness's provider prefix, so inspect_ai's `anthropic/claude-sonnet-4-5` is priced too."""
    name = normalize_model_name(model)
    for candidate in (name, name.rsplit("/", 1)[-1]):
        price = table.get(candidate)
        if price is None:
            price = table.get(_DATE_SUFFIX.sub("", candidate))
        if price is not None:
            return price
    return None
