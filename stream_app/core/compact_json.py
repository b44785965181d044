"""The JSON of stored states: compact, UTF-8, infinite costs as the `Infinity` literal.

pydantic's serializer writes a window's rows of floats several times faster than `json.dumps`,
and a state is written at every batch that touches its tier. A number may be spelled otherwise
than `json.dumps` spells it (`1e-7`, `0.00001`), never valued otherwise: `json.loads` reads back
the same float. A string is `json.dumps(..., ensure_ascii=False)`'s, byte for byte."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json


def dumps(value: Any) -> bytes:
    """`value` as compact JSON: the caller passes JSON's types only (dicts with str keys, lists,
    tuples, str, int of any size, float, bool, None; a set or bytes would be written, not
    refused). ValueError for a string that has no UTF-8 (a lone surrogate)."""
    return to_json(value, inf_nan_mode="constants")
