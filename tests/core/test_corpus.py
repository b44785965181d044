"""The bad input corpus through the core: every case gets its expected outcome."""

from __future__ import annotations

from collections import Counter

from stream_app.core.config import CoreConfig
from stream_app.core.replay import Replay
from tests.helpers import CORPUS_MAX_BYTES, corpus_stream


def test_corpus_has_the_cases_the_issue_lists() -> None:
    stream = corpus_stream()
    names = {entry["name"] for entry, _ in stream}
    assert len([n for n in names if not n.startswith("window-fill")]) >= 52
    for required in (
        "not-json",
        "not-utf8",
        "truncated-json",
        "json-array",
        "json-scalar-number",
        "string-for-number",
        "int-for-bool",
        "score-below-zero",
        "score-above-one",
        "nan-literal",
        "infinity-literal",
        "negative-tokens",
        "huge-integer",
        "completed-before-started",
        "naive-timestamp",
        "unpriced-model-without-cost",
        "over-size-limit",
        "deep-nesting",
        "empty-message",
        "valid-null-key",
        "duplicate",
        "late",
        # Issue 9: overflowing numbers, out-of-range and loose timestamps, escaping payloads.
        "cost-1e155",
        "cost-near-float-max",
        "completed-at-year-1",
        "completed-at-year-9999",
        "timestamp-epoch-seconds-string",
        "timestamp-epoch-millis-string",
        "timestamp-zero-string",
        "timestamp-space-separator",
        "timestamp-without-seconds",
        "control-bytes",
        "valid-lowercase-rfc3339",
    ):
        assert required in names
    for field in (
        "run-id",
        "tier",
        "model",
        "passed",
        "judgment",
        "tokens",
        "started-at",
        "completed-at",
    ):
        assert f"missing-{field}" in names


def test_every_case_gets_its_outcome() -> None:
    replay = Replay(CoreConfig(max_message_bytes=CORPUS_MAX_BYTES))
    stream = corpus_stream()
    for line, (_, raw) in enumerate(stream, start=1):
        replay.feed(raw, line)
    replay.flush()
    rejected = {r.line: r.reason for r in replay.rejected}
    outcomes = {
        entry["name"]: rejected.get(line)
        or (replay.ignored_lines[line].value if line in replay.ignored_lines else "accepted")
        for line, (entry, _) in enumerate(stream, start=1)
    }
    expected = {entry["name"]: entry["expected"] for entry, _ in corpus_stream()}
    assert outcomes == expected
    assert Counter(r.reason for r in replay.rejected) == Counter(
        v for v in expected.values() if v not in ("accepted", "duplicate", "late")
    )
