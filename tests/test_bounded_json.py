"""External JSON nested deeper than a fixed bound is refused on every Python (3.13 parses nesting
that 3.11 and 3.12 refuse), wherever evalstream reads it with the standard library: `tail`,
`backtest`, the producer's key, ProjectScylla's run files."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_app import bounded_json
from stream_app.backtest import SubtestStreaks
from stream_app.bounded_json import MAX_DEPTH, TooDeep, nesting_depth
from stream_app.sources.producer import experiment_key
from stream_app.sources.scylla.run_event import MalformedRun, read_json

pytestmark = pytest.mark.pythons  # depends on the CPython version: run on each


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('{"a": [1, {"b": []}]}', 4),
        ('["[[[[", "\\"]]", {"k": "{{"}]', 2),  # brackets and escaped quotes inside strings
        ('["unterminated [[[', 1),
        ("]]][[", 0),  # not JSON: fails to parse anyway
    ],
)
def test_depth_counts_brackets_outside_strings(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth


def test_the_bound_itself_parses_one_more_is_refused() -> None:
    assert bounded_json.loads(nested(MAX_DEPTH)) is not None
    with pytest.raises(TooDeep, match=f"nested {MAX_DEPTH + 1} deep"):
        bounded_json.loads(nested(MAX_DEPTH + 1).encode())


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-le", "utf-32"])
def test_bytes_are_measured_as_the_text_they_decode_to(encoding: str) -> None:
    """A UTF-16 file whose text holds U+2200 (a 0x22 byte, a quote in ASCII) is measured right."""
    document = '{"note": "\u2200 tests pass", "x": ' + nested(2000) + "}"
    with pytest.raises(TooDeep):
        bounded_json.loads(document.encode(encoding))
    shallow = '{"note": "\u2200 tests pass", "x": ' + nested(3) + "}"
    assert bounded_json.loads(shallow.encode(encoding))["note"] == "\u2200 tests pass"


def test_a_deep_field_makes_a_run_file_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "run_result.json"
    path.write_text('{"extra": ' + nested(2000) + ', "judge_passed": true}')
    with pytest.raises(MalformedRun) as raised:
        read_json(path)
    assert raised.value.reason == "invalid_json"


def test_a_deep_line_has_no_key_and_no_subtest() -> None:
    line = '{"experiment_id": "e", "tier": "T0", "subtest": "00", "x": ' + nested(2000) + "}"
    assert experiment_key(line.encode()) is None
    streaks = SubtestStreaks()
    streaks.see(line.encode())
    assert streaks.runs == {}
