"""Python code as CodeBLEU reads it, the same on every supported Python: the grammar of 3.11, the
oldest. Newer interpreters parse more (3.12's `type` statements, generics and PEP 701 f-strings)
and tokenize f-strings into parts, so a score taken with their own `ast` and `tokenize` would
change with the worker's version. Code that 3.11 would not parse is not Python here."""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections.abc import Iterator
from typing import Final

GRAMMAR: Final = (3, 11)
"""The Python version whose grammar CodeBLEU parses, on every interpreter."""
_SKIPPED: Final = frozenset(
    {
        tokenize.NEWLINE,
        tokenize.NL,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.COMMENT,
        tokenize.ENDMARKER,
        tokenize.ENCODING,
    }
)
_ERRORS: Final = (SyntaxError, ValueError, RecursionError, MemoryError, tokenize.TokenError)


def parse_module(code: str) -> ast.Module | None:
    """The module as 3.11 parses it, or None when 3.11 would not."""
    tree = _parse(code)
    if tree is None or (sys.version_info >= (3, 12) and _raw_tokens(code) is None):
        return None
    return tree


def python_tokens(code: str) -> list[str] | None:
    """The code's tokens as 3.11 gives them (an f-string is one token), without whitespace and
    comments; None when 3.11 would not parse the code."""
    tokens = _raw_tokens(code) if _parse(code) is not None else None
    if tokens is None:
        return None
    return [t.string for t in tokens if t.type not in _SKIPPED]


def _parse(code: str) -> ast.Module | None:
    """`ast.parse` with 3.11's grammar (which newer interpreters check only in part)."""
    try:
        return ast.parse(code, feature_version=GRAMMAR)
    except _ERRORS:
        return None


def _raw_tokens(code: str) -> list[tokenize.TokenInfo] | None:
    """The code's tokens, each f-string merged into one STRING token as 3.11 makes it; None when
    an f-string uses what only 3.12 allows (PEP 701), or the code does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except _ERRORS:
        return None
    if sys.version_info < (3, 12):
        return tokens
    lines = code.splitlines(keepends=True)
    merged: list[tokenize.TokenInfo] = []
    stack: list[tuple[str, tokenize.TokenInfo]] = []  # open f-strings: closing quote, start
    for token in tokens:
        kind = token.type
        own = stack and kind in (tokenize.FSTRING_MIDDLE, tokenize.FSTRING_END)
        for quote, _ in stack[:-1] if own else stack:
            if not _fits_in_311_replacement_field(token, quote):
                return None
        if kind == tokenize.FSTRING_START:
            stack.append((_closing_quote(token.string), token))
        elif kind == tokenize.FSTRING_END:
            _, start = stack.pop()
            if not stack:
                text = "".join(_source(lines, start.start, token.end))
                merged.append(token._replace(type=tokenize.STRING, string=text, start=start.start))
        elif not stack:
            merged.append(token)
    return merged


def _closing_quote(start: str) -> str:
    """The quote that ends an f-string opened by `start` (`f"`, `rf'''`…)."""
    return start.lstrip("fFrRbBuU")


def _fits_in_311_replacement_field(token: tokenize.TokenInfo, quote: str) -> bool:
    """Whether 3.11 accepts `token` inside a replacement field of an f-string closed by `quote`:
    no backslash, no comment, not the f-string's own quote, no line break in a one-line string."""
    text = token.string
    if token.type == tokenize.COMMENT or "\\" in text or quote in text:
        return False
    return len(quote) == 3 or (token.start[0] == token.end[0] and token.type != tokenize.NL)


def _source(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> Iterator[str]:
    """The source text from `start` to `end`, (row, column) positions as tokenize gives them."""
    (first, col), (last, end_col) = start, end
    if first == last:
        yield lines[first - 1][col:end_col]
        return
    yield lines[first - 1][col:]
    yield from lines[first : last - 1]
    yield lines[last - 1][:end_col]
