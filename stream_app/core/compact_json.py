"""The JSON of stored states: compact, UTF-8, infinite costs as the `Infinity` literal.

pydantic's serializer writes a window's rows of floats about five times faster than `json.dumps`,
and a state is written at every batch that touches its tier. Its text differs from
`json.dumps(..., separators=(",", ":"), ensure_ascii=False)` only in an exponent's padding
(`1e-7`, not `1e-07`): the same values when read back, strings byte for byte alike."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json


def dumps(value: Any) -> bytes:
    """`value` (dicts, lists, tuples, str, int of any size, float, bool, None) as compact JSON;
    ValueError for a string that has no UTF-8 (a lone surrogate)."""
    return to_json(value, inf_nan_mode="constants")
