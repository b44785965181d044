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


class TooDeep(ValueError):
    """JSON nested deeper than `MAX_DEPTH` (a ValueError, as the parser's own refusals)."""


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text`, brackets inside strings aside (an
    estimate for text that is not JSON, which fails to parse anyway). Linear in its length."""
    depth = deepest = 0
    for bracket in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def loads(data: str | bytes, **options: Any) -> Any:
    """`json.loads`, refusing nesting deeper than `MAX_DEPTH` with `TooDeep`. Bytes are decoded
    first as `json.loads` decodes them (UTF-8, -16 or -32), so the depth is that of the text."""
    text = (
        data.decode(json.detect_encoding(data), "surrogatepass")
        if isinstance(data, bytes)
        else data
    )
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise TooDeep(f"nested {depth} deep, more than {MAX_DEPTH}")
    return json.loads(text, **options)
