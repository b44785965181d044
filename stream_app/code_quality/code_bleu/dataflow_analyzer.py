"""CodeBLEU's semantic dataflow match (Ren et al. 2020) on Python's own `ast`.

`comesFrom` and `computedFrom` edges between variable occurrences, variables renamed in order of
appearance, so only the flow counts. Unlike the reference implementation, parents compare as
sorted sets (no dependence on hash order), and the walk has a budget counted in work, not time
(`WORK_BUDGET`, the same everywhere): code over it has an undefined dataflow (None), like code
that does not parse. Definition and degenerate cases: docs/code-quality.md, 'CodeBLEU'."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import NamedTuple

from stream_app.code_quality.code_bleu.ast_matcher import parse_python
from stream_app.code_quality.code_bleu.python_grammar import render_fstring

WORK_BUDGET = 1_000_000
"""Visited nodes plus copied positions allowed for one side's graph: the largest standard library
modules (100-230 kB) take 200,000-550,000; about a second of work at most."""
TWICE_WALKED_LOOPS = 3
"""Loops nested up to this depth are walked twice (to see flows carried around them); deeper
ones once, or nesting would cost 2^depth."""

Pos = tuple[int, int]
States = dict[str, list[Pos]]
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class DataflowEdge(NamedTuple):
    """A normalized dataflow node: variable id, relation, and the ids it flows from (sorted)."""

    variable: str
    relation: str
    parents: tuple[str, ...]


@dataclass
class _Item:
    name: str
    pos: Pos
    relation: str
    parents: list[str] = field(default_factory=list)
    parent_pos: list[Pos] = field(default_factory=list)


class _Token(NamedTuple):
    text: str
    pos: Pos
    identifier: bool


def _pos(node: ast.AST) -> Pos | None:
    lineno = getattr(node, "lineno", None)
    if lineno is not None:
        return (lineno, getattr(node, "col_offset", 0))
    positions = [p for c in ast.iter_child_nodes(node) if (p := _pos(c)) is not None]
    return min(positions) if positions else None


def _leaf(node: ast.AST) -> _Token | None:
    pos = _pos(node)
    if pos is None:
        return None
    if isinstance(node, ast.Name):
        return _Token(node.id, pos, True)
    if isinstance(node, ast.Constant):
        return _Token(repr(node.value)[:64], pos, False)
    if isinstance(node, ast.JoinedStr):
        return _Token(render_fstring(node)[:64], pos, False)
    return None


def _parts(node: ast.AST) -> list[ast.AST | _Token]:
    """A node's children in source order, with the names the AST keeps as plain strings
    (attributes, keyword arguments, imported names, def/class names, parameters) as tokens."""
    parts: list[tuple[Pos, int, ast.AST | _Token]] = []
    for index, child in enumerate(ast.iter_child_nodes(node)):
        if isinstance(
            child, ast.expr_context | ast.operator | ast.unaryop | ast.cmpop | ast.boolop
        ):
            continue
        pos = _pos(child)
        if pos is not None:
            parts.append((pos, index, child))
    here = _pos(node) or (0, 0)
    if isinstance(node, ast.Attribute) and node.end_lineno is not None:
        end_col = node.end_col_offset or 0
        parts.append(
            ((node.end_lineno, end_col - len(node.attr)), -1, _Token(node.attr, here, True))
        )
    elif isinstance(node, ast.keyword) and node.arg:
        parts.append((here, -1, _Token(node.arg, here, True)))
    elif isinstance(node, ast.alias):
        parts.append((here, -1, _Token(node.asname or node.name, here, True)))
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        name_pos = (here[0], here[1] + 1)  # after `def`/`class`, before the parameters
        parts.append((name_pos, -1, _Token(node.name, name_pos, True)))
    elif isinstance(node, ast.arg):
        parts.append((here, -1, _Token(node.arg, here, True)))
    parts.sort(key=lambda p: (p[0], p[1]))
    return [p[2] for p in parts]


def _tokens(node: ast.AST | None) -> list[_Token]:
    """Every identifier and literal occurrence under a node, in source order."""
    if node is None:
        return []
    leaf = _leaf(node)
    if leaf is not None:
        return [leaf]
    out: list[_Token] = []
    for part in _parts(node):
        out.extend([part] if isinstance(part, _Token) else _tokens(part))
    return out


class _TooComplex(Exception):
    """The graph would take more than `WORK_BUDGET`."""


class _Builder:
    def __init__(self) -> None:
        self.items: list[_Item] = []
        self.work = 0
        self.loops = 0  # loops around the node being visited

    def spend(self, units: int) -> None:
        self.work += units
        if self.work > WORK_BUDGET:
            raise _TooComplex

    def use(self, token: _Token, states: States) -> States:
        if token.text in states:
            self.spend(len(states[token.text]))
            self.items.append(
                _Item(token.text, token.pos, "comesFrom", [token.text], list(states[token.text]))
            )
        else:
            if token.identifier:  # a first occurrence starts the variable's chain
                states[token.text] = [token.pos]
            self.items.append(_Item(token.text, token.pos, "comesFrom"))
        return states

    def assign(self, target: ast.AST, value: ast.AST | None, states: States) -> States:
        lefts: list[ast.AST] = [target]
        rights: list[ast.AST | None] = [value]
        if (
            isinstance(target, ast.Tuple | ast.List)
            and isinstance(value, ast.Tuple | ast.List)
            and len(target.elts) == len(value.elts) > 0
        ):
            lefts, rights = list(target.elts), list(value.elts)
        for left, right in zip(lefts, rights, strict=True):
            sources = _tokens(right)
            for token in _tokens(left):
                self.items.append(
                    _Item(
                        token.text,
                        token.pos,
                        "computedFrom",
                        [s.text for s in sources],
                        [s.pos for s in sources],
                    )
                )
                states[token.text] = [token.pos]
        return states

    def block(self, statements: list[ast.stmt], states: States) -> States:
        for statement in statements:
            states = self.visit(statement, states)
        return states

    def visit(self, node: ast.AST, states: States) -> States:
        self.spend(1)
        leaf = _leaf(node)
        if leaf is not None:
            return self.use(leaf, states)
        if isinstance(node, ast.Assign):
            states = self.visit(node.value, states)
            for target in node.targets:
                states = self.assign(target, node.value, states)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            if node.value is not None:
                states = self.visit(node.value, states)
                states = self.assign(node.target, node.value, states)
        elif isinstance(node, ast.NamedExpr):
            states = self.visit(node.value, states)
            states = self.assign(node.target, node.value, states)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            states = self._loop(node, states)
        elif isinstance(node, ast.If):
            self.spend(2 * sum(len(v) for v in states.values()))  # two copies and a merge
            after_body = self.block(node.body, self.visit(node.test, _copy(states)))
            after_else = self.block(node.orelse, _copy(states)) if node.orelse else states
            states = _merge(after_body, after_else)
        elif isinstance(node, _COMPREHENSIONS):
            heads = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for head in heads:
                states = self.visit(head, states)
            for generator in node.generators:
                states = self.visit(generator.iter, states)
                states = self.assign(generator.target, generator.iter, states)
                for condition in generator.ifs:
                    states = self.visit(condition, states)
        elif isinstance(node, ast.arguments):
            states = self._parameters(node, states)
        else:
            for part in _parts(node):
                states = (
                    self.use(part, states) if isinstance(part, _Token) else self.visit(part, states)
                )
        return states

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While, states: States) -> States:
        """Twice (the second pass sees flows carried around the loop) unless nested deep."""
        self.loops += 1
        for _ in range(2 if self.loops <= TWICE_WALKED_LOOPS else 1):
            if isinstance(node, ast.While):
                states = self.visit(node.test, states)
            else:
                states = self.visit(node.iter, states)
                states = self.assign(node.target, node.iter, states)
            states = self.block(node.body, states)
        self.loops -= 1
        return self.block(node.orelse, states)

    def _parameters(self, args: ast.arguments, states: States) -> States:
        positional = args.posonlyargs + args.args
        defaults: dict[int, ast.expr | None] = {}
        with_default = positional[len(positional) - len(args.defaults) :]
        for param, positional_default in zip(with_default, args.defaults, strict=True):
            defaults[id(param)] = positional_default
        for param, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            defaults[id(param)] = kw_default
        params = [*positional, args.vararg, *args.kwonlyargs, args.kwarg]
        for param in sorted(
            (p for p in params if p is not None), key=lambda p: (p.lineno, p.col_offset)
        ):
            default = defaults.get(id(param))
            if default is not None:
                states = self.visit(default, states)
                states = self.assign(
                    ast.Name(param.arg, lineno=param.lineno, col_offset=param.col_offset),
                    default,
                    states,
                )
            else:
                states = self.use(_Token(param.arg, (param.lineno, param.col_offset), True), states)
            if param.annotation is not None:
                states = self.visit(param.annotation, states)
        return states


def _copy(states: States) -> States:
    return {k: list(v) for k, v in states.items()}


def _merge(*branches: States) -> States:
    merged: States = {}
    for branch in branches:
        for name, positions in branch.items():
            merged.setdefault(name, []).extend(positions)
    return {name: sorted(set(positions)) for name, positions in merged.items()}


def _graph(tree: ast.Module) -> list[DataflowEdge]:
    builder = _Builder()
    builder.block(tree.body, {})
    items = sorted(builder.items, key=lambda i: i.pos)
    linked = {i.pos for i in items if i.parent_pos} | {p for i in items for p in i.parent_pos}
    merged: dict[Pos, _Item] = {}
    for item in items:
        if item.pos not in linked:
            continue
        seen = merged.get(item.pos)
        if seen is None:
            merged[item.pos] = _Item(item.name, item.pos, item.relation, list(item.parents))
        else:
            seen.parents.extend(p for p in item.parents if p not in seen.parents)
    names: dict[str, str] = {}
    edges = []
    for item in merged.values():
        parents = list(dict.fromkeys(item.parents))
        for name in [*parents, item.name]:
            names.setdefault(name, f"var_{len(names)}")
        edges.append(
            DataflowEdge(names[item.name], item.relation, tuple(sorted(names[p] for p in parents)))
        )
    return edges


def extract_dataflows(code: str) -> list[DataflowEdge] | None:
    """The normalized dataflow graph of Python code (edges in source order); None if it does not
    parse (or nests deeper than the parser's limit) or exceeds the work budget."""
    tree = parse_python(code)
    if tree is None:
        return None
    try:
        return _graph(tree)
    except (_TooComplex, RecursionError):
        return None


def calculate_dataflow_match(candidate: str, reference: str) -> float | None:
    """Share of the reference's dataflow edges the candidate has (clipped); None when undefined."""
    ref = extract_dataflows(reference)
    if not ref:
        return None
    cand = extract_dataflows(candidate) or []
    remaining: dict[DataflowEdge, int] = {}
    for edge in cand:
        remaining[edge] = remaining.get(edge, 0) + 1
    matched = 0
    for edge in ref:
        if remaining.get(edge, 0) > 0:
            remaining[edge] -= 1
            matched += 1
    return matched / len(ref)
