"""CodeBLEU's syntactic AST match (Ren et al. 2020) on Python's own `ast`.

A subtree counts by its shape (node types and operators; names and literal values left out, a
literal keeps its type). The reference implementation matches tree-sitter's concrete syntax tree
instead, so partially matching code scores differently (identical code: 1.0 in both). Definition
and degenerate cases: docs/code-quality.md, 'CodeBLEU'."""

from __future__ import annotations

import ast
from collections import Counter

from stream_app.code_quality.code_bleu.python_grammar import parse_module


def parse_python(code: str) -> ast.Module | None:
    """The module without docstrings, or None when the code is not Python as CodeBLEU reads it
    (3.11's grammar on every version, at most `python_grammar.MAX_DEPTH` deep)."""
    tree = parse_module(code)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:]
    return tree


def _label(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return f"Constant:{type(node.value).__name__}"
    return type(node).__name__


def _shapes_of_pair(candidate: str, reference: str) -> tuple[Counter[str], Counter[str]] | None:
    """Subtree counts of both sides; None when the reference does not parse."""
    ref_tree = parse_python(reference)
    if ref_tree is None:
        return None
    cand_tree = parse_python(candidate)
    ref = extract_subtrees(ref_tree)
    cand = extract_subtrees(cand_tree) if cand_tree is not None else Counter()
    return cand, ref


def extract_subtrees(tree: ast.AST) -> Counter[str]:
    """Subtree shape -> count. A shape is a canonical s-expression of node types, comparable across
    trees; built bottom-up without recursion, so deeply nested code cannot exhaust the stack."""
    names: dict[int, str] = {}
    counts: Counter[str] = Counter()
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, expanded = stack.pop()
        children = [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr_context)]
        if not expanded:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(children))
            continue
        if children:  # a leaf is named by its label: CPython shares one `Add`, `Lt`… node
            parts = " ".join(names.pop(id(c), "") or _label(c) for c in children)
            text = f"({_label(node)} {parts})"
            counts[text] += 1
            names[id(node)] = text
    return counts


def calculate_ast_match(candidate: str, reference: str) -> float | None:
    """Share of the reference's subtrees the candidate has (clipped); None when undefined."""
    pair = _shapes_of_pair(candidate, reference)
    if pair is None:
        return None
    cand, ref = pair
    total = sum(ref.values())  # ints
    if total == 0:
        return None
    return sum(min(count, cand[shape]) for shape, count in ref.items()) / total  # ints
