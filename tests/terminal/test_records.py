"""The kinds of output records, declared once for `tail` and the live table: every kind has its
schema, its line, its topic and a short name; and how a suite's tier prints on one line."""

from __future__ import annotations

from typing import Any, get_args

from schemas.suites import SuiteTier
from stream_app.commands.tail import resolve_topic
from stream_app.service.settings import load_settings
from stream_app.terminal.records import (
    FORMATS,
    MODELS,
    SHORT_NAMES,
    Kind,
    format_record,
    output_kinds,
    suite_line,
)
from tests.helpers import KafkaRecord as Record
from tests.suite_reports import suite_tier

SETTINGS = load_settings()


def test_every_kind_has_its_schema_line_topic_and_short_name() -> None:
    kinds = set(get_args(Kind))
    assert set(MODELS) == kinds
    assert set(FORMATS) == kinds
    assert set(SHORT_NAMES.values()) == kinds
    assert set(output_kinds(SETTINGS).values()) == kinds
    for kind in kinds:  # the kind is the field of `topics` that names its topic
        assert output_kinds(SETTINGS)[getattr(SETTINGS.topics, kind)] == kind


def test_suites_is_the_suite_tiers_topic() -> None:
    assert resolve_topic(SETTINGS, "suites").topic == "suite-tiers"
    assert resolve_topic(SETTINGS, "suite-tiers").kind == "suite_tiers"
    renamed = load_settings(topics={"suite_tiers": "team-a.suites"})
    assert resolve_topic(renamed, "suites").topic == "team-a.suites"
    assert resolve_topic(renamed, "team-a.suites").kind == "suite_tiers"


def report(dropped: bool, experiments: int = 3, **fields: Any) -> SuiteTier:
    evidence = {"pass_rate": 1.2, "score": 0.05}
    return suite_tier(
        "claude\x1b[2J", "T2", experiments=experiments, dropped=dropped, evidence=evidence, **fields
    )


def test_suite_line() -> None:
    value = report(dropped=False).model_dump_json().encode()
    line = format_record("suite_tiers", Record("suite-tiers", value, b"claude/T2"))
    assert line == (
        "suite claude\\x1b[2J/T2  pass 60.0 [50.0, 70.0]  vs T0 +4.0 [-2.0, +10.0] ~  "
        "composite 70.0 [60.0, 80.0]  vs T0 +3.0 [-1.0, +7.0] ~  "
        "3 experiments paired, 120 runs  drop evidence pass_rate 1.20 score 0.05"
    )
    dropped = report(
        dropped=True,
        experiments=1,
        difference=(0.1, 0.05, 0.15),
        composite_difference=(-0.1, -0.15, -0.05),
    )
    assert suite_line(dropped) == (
        "suite claude\\x1b[2J/T2  pass 60.0 [50.0, 70.0]  vs T0 +10.0 [+5.0, +15.0]  "
        "composite 70.0 [60.0, 80.0]  vs T0 -10.0 [-15.0, -5.0]  "
        "1 experiment paired, 120 runs  DROPPED (evidence pass_rate 1.20 score 0.05)"
    )
    no_evidence = suite_tier(
        "s", "T0", experiments=2, runs=0, pass_rate=None, composite=None, evidence={}
    )
    assert suite_line(no_evidence) == (
        "suite s/T0  pass —  baseline  composite —  baseline  2 experiments, 0 runs  "
        "drop evidence none yet"
    )
    unpaired = suite_tier("s", "T4", experiments=0, difference=None, composite_difference=None)
    assert "  vs T0 —  0 experiments paired, " in suite_line(unpaired)


def test_suite_tombstones_and_foreign_records() -> None:
    assert format_record("suite_tiers", Record("suite-tiers", None, b"claude/T2")) == (
        "claude/T2  retired"
    )
    odd = format_record("suite_tiers", Record("suite-tiers", b'{"suite": "x"}', b"k", 1, 7))
    assert odd.startswith("[1]@7 not a SuiteTier: ")
