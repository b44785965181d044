"""Docstrings stay short: the manual lives in docs/, a docstring says why the code is shaped so.
Every module, class and function docstring of stream_app/ and schemas/ is under 10 lines."""

from __future__ import annotations

import ast

from tests.helpers import REPO

MAX_LINES = 9
PACKAGES = ("stream_app", "schemas")
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def long_docstrings(source: str, path: str) -> list[str]:
    """`path:line name (N lines)` for every docstring of `source` longer than `MAX_LINES`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, DOCUMENTED):
            continue
        docstring = ast.get_docstring(node, clean=False)
        if docstring is None:
            continue
        lines = len(docstring.splitlines())
        if lines > MAX_LINES:
            if isinstance(node, ast.Module):
                found.append(f"{path}:1 <module> ({lines} lines)")
            else:
                found.append(f"{path}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_docstring_of_the_package_is_10_lines_or_longer() -> None:
    files = sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py"))
    assert files
    found: list[str] = []
    for path in files:
        found += long_docstrings(path.read_text(), str(path.relative_to(REPO)))
    assert not found, "docstrings of 10 lines or more (point to docs/):\n" + "\n".join(found)


def test_the_check_finds_a_long_docstring() -> None:
    nine = "\n".join(f"line {n}" for n in range(1, 10))
    ten = "\n".join(f"line {n}" for n in range(1, 11))
    source = "\n".join(
        [
            f'"""{nine}"""',  # 9 lines: allowed
            "class Example:",
            "    def method(self) -> None:",
            f'        """{ten}"""',  # 10 lines: reported
        ]
    )
    assert long_docstrings(source, "example.py") == ["example.py:11 method (10 lines)"]
