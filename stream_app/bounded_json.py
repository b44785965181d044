"""JSON from outside, parsed the same on every Python: how deep the standard library can nest
differs (3.13 parses what 3.11 and 3.12 refuse with a RecursionError), so input nested deeper than
a fixed bound is not JSON here, on every version, before the parser is asked."""

from __future__ import annotations

import json
import re
from typing import Any, Final

MAX_DEPTH: Final = 500
"""The deepest nesting of arrays and objects taken as JSON: below every Python's parser limit."""
_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*"?', re.S)
_BRACKET: Final = re.compile(r"[\[\]{}]")
_STRING_BYTES: Final = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.S)
_BRACKET_BYTES: Final = re.compile(rb"[\[\]{}]")


class TooDeep(ValueError):
    """JSON nested deeper than `MAX_DEPTH` (a ValueError, as the parser's own refusals)."""


def nesting_depth(text: str | bytes) -> int:
    """The deepest nesting of arrays and objects in `text`, brackets inside strings aside (an
    estimate for text that is not JSON, which fails to parse anyway). Linear in its length."""
    if isinstance(text, bytes):
        opening = [
            m.group() in b"[{" for m in _BRACKET_BYTES.finditer(_STRING_BYTES.sub(b"", text))
        ]
    else:
        opening = [m.group() in "[{" for m in _BRACKET.finditer(_STRING.sub("", text))]
    depth = deepest = 0
    for opens in opening:
        depth += 1 if opens else -1
        deepest = max(deepest, depth)
    return deepest


def loads(text: str | bytes, **options: Any) -> Any:
    """`json.loads`, refusing nesting deeper than `MAX_DEPTH` with `TooDeep`."""
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise TooDeep(f"nested {depth} deep, more than {MAX_DEPTH}")
    return json.loads(text, **options)
