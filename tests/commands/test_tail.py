"""`stream-app tail`: which topic a name means, and how each kind of record is printed (one
readable line, or a JSON line), without a broker."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from helpers import encode, make_event
from schemas.dead_letter import MessageOrigin
from schemas.grade_change import GradeChange
from stream_app.commands import cli
from stream_app.commands.tail import TailError, format_record, json_line, resolve_topic
from stream_app.core.ingest import evaluate_run, make_dead_letter
from stream_app.core.replay import replay_lines
from stream_app.service.settings import load_settings

SETTINGS = load_settings()


@dataclass
class Record:
    """What aiokafka hands over, as far as tail reads it."""

    topic: str
    value: bytes | None
    key: bytes | None = None
    partition: int = 0
    offset: int = 0
    timestamp: int = 1_767_603_660_000


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
    assert full == "exp/T0  grade B  median composite 0.925  window 10/10"
    assert filling == "exp/T1  grade F  median composite 0.425  window 3/10 (filling)"


def test_report_line() -> None:
    _, reports = replayed({"T0": 10, "T1": 3, "T2": 1})
    line = format_record("cross_tier", Record("cross-tier-reports", reports[0], b"exp"))
    assert line == "exp  uplift over T0: T1 -54.1%  T2 -54.1%"
    _, without_baseline = replayed({"T1": 3})
    line = format_record("cross_tier", Record("cross-tier-reports", without_baseline[0], b"exp"))
    assert line == "exp  uplift over T0: none yet (no T0 aggregate)"


def test_grade_change_line() -> None:
    change = GradeChange(
        experiment_id="exp",
        tier="T5",
        previous_grade="B",
        grade="D",
        direction="drop",
        composite_median=0.6123,
        at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
        run_id="exp/T5/07/run_02",
    )
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
    return make_dead_letter(raw, rejection, origin).model_dump_json().encode()  # type: ignore[arg-type]


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
    from stream_app.commands.broker import free_port

    closed = f"127.0.0.1:{free_port()}"
    assert cli.main(["tail", "dlq", "--broker", closed, "--timeout", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"stream-app tail: error: broker {closed} not reached within 1 s"
