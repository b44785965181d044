"""CodeBLEU gives the same numbers on every supported Python: it reads code with 3.11's grammar,
whatever the interpreter. Its tokens, whether the code parses, and the scores of the bundled pairs
and of code whose reading changed in 3.12 (PEP 701 f-strings, `type` statements, generics, code
that only tokenizes) are committed in tests/data/codebleu-expected.json; this test, marked
`pythons` so that `make test` runs it on each supported CPython, compares. Rewrite it after a
deliberate change with `.venv/bin/python -m tests.code_quality.test_code_bleu_versions --write`."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from stream_app.code_quality.code_bleu import calculate_code_bleu, tokenize_code
from stream_app.code_quality.code_bleu.python_grammar import parse_module
from tests.helpers import DATA_DIR

pytestmark = pytest.mark.pythons  # depends on the CPython version: run on each

EXPECTED = DATA_DIR / "codebleu-expected.json"
BASE = 'def greet(name, n):\n    return f"hello {name}, you are {n + 1} years old"\n'
SOURCES = {
    "plain f-string": BASE,
    "f-string with a format spec": 'x = f"{value!r:>{width}} and {{braces}} {y:#x}"\n',
    "nested f-strings, other quotes": "x = f'{f\"{y}\"}' + f'''{f\"{z}\"}'''\n",
    "multi-line triple-quoted f-string": 'x = f"""\n  {a +\n   b}\n"""\n',
    "PEP 701: the f-string's own quote": 'x = f"{d["a"]}"\n',
    "PEP 701: a backslash": "x = f\"{'\\n'.join(a)}\"\n",
    "PEP 701: a comment": 'x = f"""{a # c\n}"""\n',
    "a hash in a string in an f-string": "x = f\"{'#'}\"\n",
    "PEP 701: nested same quotes": 'x = f"{f"{y}"}"\n',
    "a type statement": "type Pair = tuple[int, int]\n",
    "a generic function": "def first[T](xs: list[T]) -> T:\n    return xs[0]\n",
    "an unterminated string": 'def f():\n    return "abc\n',
    "a character Python has no token for": "a = $b\n",
    "tokenizes but does not parse": "def f(:\n    return 1\n",
    "a match statement": "match x:\n    case [a, *_]:\n        pass\n",
    "an exception group": "try:\n    pass\nexcept* ValueError:\n    pass\n",
    "unicode names": "naïve = 1\nπ = naïve * 2\n",
    "deep nesting": "x = " + "(" * 150 + "1" + ")" * 150 + "\n",
    "a format spec with a field": 'def pad(value, width):\n    return f"{value:>{width}s}"\n',
    "a name with combining marks": "def \u0928\u093e\u092e(x):\n    return x + 1\n",
    "a form feed before an f-string": 'import os\n\x0c\ndef f(a):\n    return f"{a}!"\n',
    "classic Mac line ends": "def f(a):\r    return a + 1\r",
    "a line continued in a string": 'x = f"abc\\\ndef{y}"\n',
    "PEP 701: a continued line in a field": 'x = f"""{1 + \\\n2}"""\n',
    "PEP 701: a closing quote across tokens": "x = f'''{'a'''}'''\n",
    "an elif chain past the depth limit": "if a:\n    pass\n" + "elif a:\n    pass\n" * 150,
    "PEP 701: format specs nested two deep": 'x = f"{a:{b:>{c}}}"\n',
    "format specs nested once, dict and slice": 'x = f"{ {1: 2}[1]:{w}} {a[1:2]:>{w}.{p}f}"\n',
    "an f-string unparse quotes otherwise": "def f(n):\n    return g(f\"{' ' * n}x\")\n",
}
PAIRS = {  # (candidate, reference): shapes that moved across versions when scored together
    "format specs": ("a format spec with a field", "f-string with a format spec"),
    "f-string dataflow": ("an f-string unparse quotes otherwise", "plain f-string"),
}


def observed() -> dict[str, Any]:
    """What this interpreter makes of every source and of the bundled pairs."""
    pairs = json.loads((DATA_DIR / "codebleu_pairs.json").read_text())
    return {
        "sources": {
            name: {
                "parses": parse_module(code) is not None,
                "tokens": tokenize_code(code),
                "code_bleu_against_the_first": calculate_code_bleu(code, BASE).model_dump(),
            }
            for name, code in SOURCES.items()
        },
        "pairs": {
            **{
                p["name"]: calculate_code_bleu(p["candidate"], p["reference"]).model_dump()
                for p in pairs
            },
            **{
                name: calculate_code_bleu(SOURCES[cand], SOURCES[ref]).model_dump()
                for name, (cand, ref) in PAIRS.items()
            },
        },
    }


def test_codebleu_reads_code_as_the_committed_file_says() -> None:
    expected = json.loads(EXPECTED.read_text())
    got = json.loads(json.dumps(observed()))
    for part in ("sources", "pairs"):
        for name, value in expected[part].items():
            assert got[part][name] == value, (
                f"CodeBLEU's {part} {name!r} on Python {sys.version.split()[0]} differs from "
                "tests/data/codebleu-expected.json"
            )
    assert got == expected


@pytest.mark.parametrize(
    "name", [n for n in SOURCES if n.startswith(("PEP 701", "a type", "a generic", "an elif"))]
)
def test_code_only_newer_pythons_parse_is_not_python_here(name: str) -> None:
    assert parse_module(SOURCES[name]) is None


def test_an_f_string_is_one_token_as_311_makes_it() -> None:
    assert tokenize_code(BASE)[-1] == 'f"hello {name}, you are {n + 1} years old"'
    triple = tokenize_code(SOURCES["multi-line triple-quoted f-string"])
    assert triple == ["x", "=", 'f"""\n  {a +\n   b}\n"""']


def main() -> None:
    """Rewrite the expected file from this interpreter (`--write`)."""
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.code_quality.test_code_bleu_versions --write")
    EXPECTED.write_text(json.dumps(observed(), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {EXPECTED}")


if __name__ == "__main__":
    main()
