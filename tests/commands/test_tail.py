"""`stream-app tail`: which topic a name means, and how each kind of record is printed (one
readable line, or a JSON line), without a broker."""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.dead_letter import MessageOrigin
from stream_app.bounded_json import MAX_DEPTH as MAX_JSON_DEPTH
from stream_app.cli import main as cli
from stream_app.commands.tail import TailError, resolve_topic
from stream_app.core.ingest import evaluate_run, make_dead_letter
from stream_app.core.replay import replay_lines
from stream_app.service.settings import load_settings
from stream_app.terminal.records import MODELS, format_record, json_line
from tests.helpers import A_GRADE_DROP, encode, make_event
from tests.helpers import KafkaRecord as Record

SETTINGS = load_settings()


@pytest.mark.parametrize(
    ("name", "topic"),
    [
        ("aggregates", "tier-aggregates"),
        ("tier-aggregates", "tier-aggregates"),
        ("grades", "grade-changes"),
        ("grade-changes", "grade-changes"),
        ("reports", "cross-tier-reports"),
        ("cross-tier-reports", "cross-tier-reports"),
        ("dlq", "run-completed.dlq"),
        ("run-completed.dlq", "run-completed.dlq"),
    ],
)
def test_short_and_full_names(name: str, topic: str) -> None:
    assert resolve_topic(SETTINGS, name).topic == topic


def test_configured_topic_names_count() -> None:
    settings = load_settings(topics={"dead_letter": "team-a.dlq"})
    assert resolve_topic(settings, "dlq").topic == "team-a.dlq"
    assert resolve_topic(settings, "team-a.dlq").kind == "dead_letter"
    with pytest.raises(TailError):
        resolve_topic(settings, "run-completed.dlq")


def test_an_unknown_name_says_what_is_known() -> None:
    with pytest.raises(TailError, match=r"aggregates, grades, reports, dlq"):
        resolve_topic(SETTINGS, "run-completed")


def replayed(runs: dict[str, int]) -> tuple[list[bytes], list[bytes]]:
    """Aggregates and cross-tier reports of a replay, as the worker writes them."""
    lines = [
        encode(make_event(run_id=f"exp/{tier}/{n}", tier=tier, passed=tier == "T0"))
        for tier, count in runs.items()
        for n in range(count)
    ]
    report = replay_lines(lines, SETTINGS)
    return (
        [a.model_dump_json().encode() for a in report.tiers],
        [c.model_dump_json().encode() for c in report.cross_tier],
    )


def test_aggregate_line() -> None:
    aggregates, _ = replayed({"T0": 10, "T1": 3})
    kind = resolve_topic(SETTINGS, "aggregates").kind
    full = format_record(kind, Record("tier-aggregates", aggregates[0], b"exp/T0"))
    filling = format_record(kind, Record("tier-aggregates", aggregates[1], b"exp/T1"))
    assert full == (
        "exp/T0  grade B  median composite 0.925  window 10/10  "
        "all 10 runs: pass % 100.0 [62.3, 100.0]  drop detectors warming up"
    )
    assert filling == (
        "exp/T1  grade F  median composite 0.425  window 3/10 (filling)  "
        "all 3 runs: pass % 0.0 [0.0, 75.0]  drop detectors warming up"
    )


def test_aggregate_line_of_a_tier_watched_and_of_a_dropped_one() -> None:
    """After 50 runs the detectors watch and their evidence shows (1 pages); 45 passing runs
    then failing ones make the pass-rate detector page."""
    lines = [
        encode(
            make_event(
                run_id=f"exp/{tier}/{n}",
                tier=tier,
                passed=tier == "T0" or n < 45,
                completed_at=f"2026-01-05T{9 + n // 60:02d}:{n % 60:02d}:00Z",
            )
        )
        for tier in ("T0", "T2")
        for n in range(80)
    ]
    watched, dropped = (
        format_record("aggregates", Record("tier-aggregates", a.model_dump_json().encode()))
        for a in replay_lines(lines, SETTINGS).tiers
    )
    assert re.fullmatch(
        r"exp/T0  grade B .* all 80 runs: pass % 100\.0 \[9\d\.\d, 100\.0\]  "
        r"drop evidence pass_rate 0\.\d\d score 0\.\d\d",
        watched,
    ), watched
    assert re.fullmatch(
        r"exp/T2  grade F .* all 80 runs: pass % 56\.2 \[\d+\.\d, \d+\.\d\]  "
        r"DROPPED \(evidence pass_rate \d\.\d\d score \d\.\d\d\)",
        dropped,
    ), dropped


def test_report_line() -> None:
    _, reports = replayed({"T0": 10, "T1": 3, "T2": 1})
    line = format_record("cross_tier", Record("cross-tier-reports", reports[0], b"exp"))
    assert line == (
        "exp  uplift over T0: T1 -54.1%  T2 -54.1%  pass % vs T0, points: "
        "T1 -100.0 [-100.0, +36.9] ~  T2 -100.0 [-100.0, +49.1] ~"
    )
    _, reports = replayed({"T0": 60, "T1": 60})
    line = format_record("cross_tier", Record("cross-tier-reports", reports[-1], b"exp"))
    high = json.loads(reports[-1])["pass_rate_difference"]["T1"]["high"]
    assert high < 0
    assert line.endswith(f"pass % vs T0, points: T1 -100.0 [-100.0, {100 * high:.1f}]")  # no ~
    _, without_baseline = replayed({"T1": 3})
    line = format_record("cross_tier", Record("cross-tier-reports", without_baseline[0], b"exp"))
    assert line == "exp  uplift over T0: none yet (no T0 aggregate)"


def test_grade_change_line() -> None:
    change = A_GRADE_DROP
    line = format_record(
        "grade_changes", Record("grade-changes", change.model_dump_json().encode(), b"exp/T5")
    )
    assert line == (
        "exp/T5  B→D  drop  median composite 0.612  run exp/T5/07/run_02  "
        "at 2026-01-05T09:00:00+00:00"
    )


def dead_letter(raw: bytes) -> bytes:
    rejection = evaluate_run(raw, SETTINGS)
    assert not hasattr(rejection, "pass_rate")
    origin = MessageOrigin(topic="run-completed", partition=2, offset=41, key="k")
    return make_dead_letter(raw, rejection, origin).model_dump_json().encode()


def test_dead_letter_line_is_one_line_with_the_start_of_the_bytes() -> None:
    raw = b"not json\n\x00\x1b[31m" + b"x" * 500
    line = format_record("dead_letter", Record("run-completed.dlq", dead_letter(raw)))
    assert "\n" not in line
    assert "\x1b" not in line
    assert line.startswith("invalid_json  ")
    assert "from run-completed[2]@41" in line
    assert "bytes: 'not json\\n\\x00\\x1b[31mxxx" in line
    assert "… (515 bytes)" in line
    assert len(line) < 400


def test_dead_letter_of_a_schema_error_shows_the_detail() -> None:
    raw = encode(make_event(passed=1))
    line = format_record("dead_letter", Record("run-completed.dlq", dead_letter(raw)))
    assert line.startswith("schema  ")
    assert "passed" in line
    assert f"({len(raw)} bytes)" in line


def test_tombstones_and_foreign_records() -> None:
    assert format_record("aggregates", Record("tier-aggregates", None, b"exp/T3")) == (
        "exp/T3  retired"
    )
    assert format_record("cross_tier", Record("cross-tier-reports", None, b"exp")) == "exp  retired"
    odd = format_record("aggregates", Record("tier-aggregates", b"{oops", b"k", 1, 7))
    assert odd.startswith("[1]@7 not a TierAggregate: ")
    assert "\n" not in odd


def test_json_line_keeps_the_record() -> None:
    aggregates, _ = replayed({"T0": 10})
    doc = json.loads(json_line(Record("tier-aggregates", aggregates[0], b"exp/T0", 3, 12)))
    assert doc["topic"] == "tier-aggregates"
    assert (doc["partition"], doc["offset"], doc["key"]) == (3, 12, "exp/T0")
    assert doc["value"] == json.loads(aggregates[0])
    assert json.loads(json_line(Record("tier-aggregates", None, b"exp/T0")))["value"] is None


def test_cli_unknown_topic_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tail", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stream-app tail: error: unknown topic 'nope'")
    assert err.count("\n") == 1


def test_cli_max_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["tail", "dlq", "--max", "0"])
    assert "--max" in capsys.readouterr().err


def test_cli_unreachable_broker_is_one_line_within_the_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from stream_app.ports import free_port

    closed = f"127.0.0.1:{free_port()}"
    assert cli.main(["tail", "dlq", "--broker", closed, "--timeout", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"stream-app tail: error: broker {closed} not reached within 1 s"


def test_dead_letter_bytes_are_escaped_once() -> None:
    raw = b"\xff\xfe\x00binary \\ 'q' \"dq\" \xc3\xa9\xe2\x80\xa8"
    line = format_record("dead_letter", Record("run-completed.dlq", dead_letter(raw)))
    assert "bytes: '\\xff\\xfe\\x00binary \\\\ \\'q\\' \"dq\" é\\u2028' (" in line


def test_a_dead_letter_whose_payload_does_not_decode_is_said_not_fatal() -> None:
    letter = json.loads(dead_letter(b"\xff not utf-8"))
    assert letter["payload_encoding"] == "base64"
    letter["payload"] = "abcde"  # not base64: one character too many
    odd = format_record("dead_letter", Record("run-completed.dlq", json.dumps(letter).encode()))
    assert odd.startswith("[0]@0 unreadable DeadLetter: ")


def strict_json(line: str) -> dict[str, Any]:
    """`line` parsed as RFC 8259 JSON, as jq reads it: no NaN or Infinity, nothing beyond a
    double; and it must be one line that UTF-8 can write."""

    def reject(constant: str) -> Any:
        raise AssertionError(f"{constant} in {line[:200]!r}")

    def finite(number: str) -> float:
        assert math.isfinite(float(number)), number
        return float(number)

    assert "\n" not in line
    line.encode("utf-8")
    doc: dict[str, Any] = json.loads(line, parse_constant=reject, parse_float=finite)
    return doc


DEEP = b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}"


@pytest.mark.parametrize(
    "raw",
    [
        DEEP,
        b"[" * 100_000,
        b"1e999",
        b"-1e999",
        b"[1, 2e400]",
        b'{"a": NaN}',
        b"Infinity",
        b'{"s": "\\ud800 \\u00e9"}',  # a lone surrogate: jq rejects it
    ],
)
def test_json_line_of_a_value_it_cannot_print_as_json_is_its_text(raw: bytes) -> None:
    doc = strict_json(json_line(Record("t", raw)))
    assert doc["value_text"] == raw.decode()
    assert "value" not in doc


def test_how_deep_a_value_prints_as_json_is_the_same_on_every_python() -> None:
    """Python 3.13 parses nesting that 3.11 cannot: the bound is evalstream's, not the version's."""
    at_bound = b"[" * MAX_JSON_DEPTH + b'"]}"' + b"]" * MAX_JSON_DEPTH
    assert "value" in strict_json(json_line(Record("t", at_bound)))
    deeper = b'{"a": ' + at_bound + b"}"
    assert strict_json(json_line(Record("t", deeper)))["value_text"] == deeper.decode()


def test_pretty_lines_of_deep_or_binary_values_are_said_not_fatal() -> None:
    for kind in MODELS:
        for raw in (DEEP, b"\xff\xfe\x00", b"1e999"):
            assert " not a " in format_record(kind, Record("t", raw))


def test_json_line_tells_a_json_string_from_text_and_bytes() -> None:
    quoted = strict_json(json_line(Record("t", b'"hello"')))
    text = strict_json(json_line(Record("t", b"hello")))
    binary = strict_json(json_line(Record("t", b"\xff\xfehello")))
    tombstone = strict_json(json_line(Record("t", None)))
    assert (quoted["value"], "value_text" in quoted) == ("hello", False)
    assert (text["value_text"], "value" in text) == ("hello", False)
    assert base64.b64decode(binary["value_base64"]) == b"\xff\xfehello"
    assert {"value", "value_text"}.isdisjoint(binary)
    assert tombstone["value"] is None
    assert {k for k in quoted if k.startswith("value")} == {"value"}


def test_json_line_keeps_escaped_surrogate_pairs() -> None:
    doc = strict_json(json_line(Record("t", b'{"s": "\\ud83d\\ude00 \\u00e9"}')))
    assert doc["value"] == {"s": "\U0001f600 é"}


@settings(max_examples=300, deadline=None)
@given(
    raw=st.binary(max_size=200)
    | st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    ).map(lambda v: json.dumps(v).encode())
)
def test_json_line_is_strict_json_for_any_bytes(raw: bytes) -> None:
    doc = strict_json(json_line(Record("t", raw, b"\xffk", 2, 9)))
    assert (doc["partition"], doc["offset"], doc["key"]) == (2, 9, "\ufffdk")
    [field] = [k for k in doc if k.startswith("value")]
    if field == "value":
        assert doc["value"] == json.loads(raw)
    elif field == "value_text":
        assert doc["value_text"].encode() == raw
    else:
        assert base64.b64decode(doc["value_base64"]) == raw
