"""No number evalstream prints depends on how a Python version rounds a float sum: 3.12 made the
built-in `sum()` of floats compensated, so a formula summing floats with it prints other digits
on 3.11. Floats are summed with `math.fsum` (correctly rounded, the same on every version); the
built-in `sum` is left to integers: a count (`sum(1 for ...)`), lengths (`sum(len(...) ...)`),
or a line marked `# ints` that says so."""

from __future__ import annotations

import ast

from tests.helpers import REPO

PACKAGES = [REPO / "stream_app", REPO / "schemas"]


def integer_sum(call: ast.Call, line: str) -> bool:
    """Whether a `sum(...)` call is plainly over integers."""
    if "# ints" in line:
        return True
    first = call.args[0] if call.args else None
    if isinstance(first, ast.GeneratorExp | ast.ListComp):
        element = first.elt
        if isinstance(element, ast.Constant) and type(element.value) is int:
            return True
        if isinstance(element, ast.Call) and getattr(element.func, "id", None) == "len":
            return True
    return False


def is_builtin_sum(func: ast.expr) -> bool:
    """`sum` or `builtins.sum`."""
    if isinstance(func, ast.Attribute):
        return (
            func.attr == "sum" and isinstance(func.value, ast.Name) and func.value.id == "builtins"
        )
    return isinstance(func, ast.Name) and func.id == "sum"


def float_prone_lines(source: str) -> list[int]:
    """The line of every built-in `sum` call in `source` not plainly over integers."""
    lines = source.splitlines()
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and is_builtin_sum(node.func)
        and not integer_sum(node, lines[node.lineno - 1])
    )


def test_floats_are_summed_with_fsum() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for package in PACKAGES
        for path in sorted(package.rglob("*.py"))
        for line in float_prone_lines(path.read_text())
    ]
    assert found == [], (
        "built-in sum() where floats may be summed (use math.fsum, or mark a sum of integers "
        f"with '# ints'): {found}"
    )


def test_the_check_finds_a_float_sum() -> None:
    sample = (
        "a = sum(x * 0.5 for x in range(3))\n"
        "b = sum(1 for _ in range(3))\n"
        "c = sum(len(s) for s in ['ab'])\n"
        "d = sum(counts.values())  # ints\n"
        "e = sum([0.1] * 3)\n"
        "f = builtins.sum([0.1] * 3)\n"
    )
    assert float_prone_lines(sample) == [1, 5, 6]
