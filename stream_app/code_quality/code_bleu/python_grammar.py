"""Python code as CodeBLEU reads it, the same on every supported Python: the grammar of 3.11, the
oldest. Newer interpreters parse more (3.12's `type` statements, generics and PEP 701 f-strings),
tokenize f-strings into parts and shape some trees otherwise, so a score taken with their own
`ast` and `tokenize` would change with the worker's version. Code that 3.11 would not parse, or
that nests deeper than `MAX_DEPTH`, is not Python here. Known gaps: docs/code-quality.md."""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from typing import Final

GRAMMAR: Final = (3, 11)
"""The Python version whose grammar CodeBLEU parses, on every interpreter."""
MAX_DEPTH: Final = 100
"""Deeper syntax trees count as not parsing: code nested this deep is not real code, and where
each version's parser gives up (and, on 3.11, how much stack the caller has left) never counts."""
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
    """The module as 3.11 parses it (empty literal parts of f-strings dropped: 3.12.1 adds one to
    some format specs), or None when 3.11 would not parse it."""
    code = _newlines(code)
    tree = _parse(code)
    if tree is None or (sys.version_info >= (3, 12) and _raw_tokens(code) is None):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            node.values = [v for v in node.values if not _empty_literal(v)]
    return tree


def python_tokens(code: str) -> list[str] | None:
    """The code's tokens as 3.11 gives them (an f-string is one token, an identifier one token
    whatever its characters), without whitespace and comments; None when the code is not
    Python here (`parse_module`)."""
    code = _newlines(code)
    tokens = _raw_tokens(code) if _parse(code) is not None else None
    if tokens is None:
        return None
    return [t.string for t in _whole_names(tokens) if t.type not in _SKIPPED and t.string.strip()]


def render_fstring(node: ast.JoinedStr) -> str:
    """An f-string's text, the same on every version (`ast.unparse` picks other quotes since
    3.12): its literal parts as they are, each field as `{expression!c:spec}`."""
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value, ast.FormattedValue):
            conversion = f"!{chr(value.conversion)}" if value.conversion != -1 else ""
            spec = value.format_spec
            spec_text = f":{render_fstring(spec)}" if isinstance(spec, ast.JoinedStr) else ""
            inner = value.value
            text = render_fstring(inner) if isinstance(inner, ast.JoinedStr) else ast.unparse(inner)
            parts.append(f"{{{text}{conversion}{spec_text}}}")
    return "f" + repr("".join(parts))


def depth(tree: ast.AST) -> int:
    """The syntax tree's depth, measured without recursion."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _newlines(code: str) -> str:
    """Line ends as LF (the parser reads CRLF and a lone CR so; the tokenizers do not agree)."""
    return code.replace("\r\n", "\n").replace("\r", "\n")


def _parse(code: str) -> ast.Module | None:
    """`ast.parse` with 3.11's grammar (which newer interpreters check only in part), refusing
    trees deeper than `MAX_DEPTH`."""
    try:
        tree = ast.parse(code, feature_version=GRAMMAR)
    except _ERRORS:
        return None
    return tree if depth(tree) <= MAX_DEPTH else None


def _empty_literal(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == ""


def _whole_names(tokens: list[tokenize.TokenInfo]) -> list[tokenize.TokenInfo]:
    """Tokens with an identifier that 3.11's tokenizer cut at a combining mark (it reads names
    with a regular expression's word characters; 3.12's reads them whole) put back together."""
    whole: list[tokenize.TokenInfo] = []
    for token in tokens:
        last = whole[-1] if whole else None
        if (
            last is not None
            and last.end == token.start
            and last.type in (tokenize.NAME, tokenize.ERRORTOKEN)
            and token.type in (tokenize.NAME, tokenize.ERRORTOKEN)
            and (last.string + token.string).isidentifier()
        ):
            whole[-1] = last._replace(
                type=tokenize.NAME, string=last.string + token.string, end=token.end
            )
        else:
            whole.append(token)
    return whole


def _raw_tokens(code: str) -> list[tokenize.TokenInfo] | None:
    """The code's tokens, each f-string merged into one STRING token as 3.11 makes it; None when
    an f-string uses what only 3.12 allows (PEP 701), or the code does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except _ERRORS:
        return None
    if sys.version_info < (3, 12):
        return tokens
    lines = list(iter(io.StringIO(code).readline, ""))  # as tokenize counts them
    merged: list[tokenize.TokenInfo] = []
    stack: list[tuple[tokenize.TokenInfo, list[tokenize.TokenInfo], _Fields]] = []
    for token in tokens:  # an open f-string: its start, its own literal parts, its fields
        if token.type == tokenize.FSTRING_START:
            stack.append((token, [], _Fields()))
        elif token.type == tokenize.FSTRING_MIDDLE and stack:
            stack[-1][1].append(token)
        elif token.type == tokenize.FSTRING_END and stack:
            start, middles, _ = stack.pop()
            if not _fits_311(lines, start, middles, token):
                return None
            if not stack:
                text = _source(lines, start.start, token.end)
                merged.append(token._replace(type=tokenize.STRING, string=text, start=start.start))
        elif stack:
            if token.type == tokenize.OP and not stack[-1][2].step(token.string):
                return None
        else:
            merged.append(token)
    return merged


class _Fields:
    """The replacement fields open in one f-string, followed operator by operator, to refuse
    what 3.11 does: a field in the format spec of a field that is itself in a format spec."""

    def __init__(self) -> None:
        self.open: list[list[int]] = []  # per open field: [brackets open in it, in its spec]

    def step(self, op: str) -> bool:
        """Take one operator inside the f-string; False when 3.11 would refuse the nesting."""
        top = self.open[-1] if self.open else None
        if op == "{" and (top is None or top[1]):
            self.open.append([0, 0])
            return sum(1 for _, spec in self.open[:-1] if spec) < 2
        if top is None:
            return True
        if op in "([{":
            top[0] += 1
        elif op in ")]}":
            if top[0]:
                top[0] -= 1
            elif op == "}":
                self.open.pop()
        elif op == ":" and not top[0]:
            top[1] = 1
        return True


def _fits_311(
    lines: list[str],
    start: tokenize.TokenInfo,
    middles: list[tokenize.TokenInfo],
    end: tokenize.TokenInfo,
) -> bool:
    """Whether 3.11 reads this f-string as the one string it is: it ends it at the first closing
    quote not escaped in a literal part, and refuses a backslash or a comment in a replacement
    field and a line break in a one-line string (PEP 701 lifted all four)."""
    quote = start.string.lstrip("fFrRbBuU")
    body_start = start.end
    literal = [(m.start, m.end) for m in middles]
    pieces = []  # (text, is_literal) in source order
    at = body_start
    for first, last in literal:
        pieces.append((_source(lines, at, first), False))
        pieces.append((_source(lines, first, last), True))
        at = last
    pieces.append((_source(lines, at, end.start), False))
    body = "".join(text for text, _ in pieces)
    if len(quote) == 1 and "\n" in body.replace("\\\n", ""):  # a continued line is no break
        return False
    for text, is_literal in pieces:
        if not is_literal and ("\\" in text or "#" in _without_strings(text)):
            return False
    return _first_closing_quote(body, quote) == len(body)


def _without_strings(text: str) -> str:
    """`text` with its quoted parts removed (a `#` inside a string is no comment)."""
    out, quote, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            if text.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
        elif ch in "'\"":
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(quote)
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _first_closing_quote(body: str, quote: str) -> int:
    """Where 3.11's string lexer would end an f-string whose text after the opening quote is
    `body`: at the first `quote` not escaped by a backslash (len(body) when none)."""
    i = 0
    while i < len(body):
        if body[i] == "\\":
            i += 2
            continue
        if body.startswith(quote, i):
            return i
        i += 1
    return len(body)


def _source(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source text from `start` to `end`, (row, column) positions as tokenize gives them."""
    (first, col), (last, end_col) = start, end
    if first == last:
        return lines[first - 1][col:end_col]
    return lines[first - 1][col:] + "".join(lines[first : last - 1]) + lines[last - 1][:end_col]
