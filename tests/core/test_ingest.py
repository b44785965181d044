"""From bytes to metrics or to a dead letter that keeps the original bytes exactly."""

import base64
from datetime import UTC, datetime

import pytest

from schemas import DeadLetter, MessageOrigin, RunMetrics
from stream_app.core.config import CoreConfig
from stream_app.core.ingest import Rejection, evaluate_run, make_dead_letter
from tests.helpers import encode, make_event

CONFIG = CoreConfig()


def test_accepted_event_gives_run_metrics() -> None:
    result = evaluate_run(encode(make_event()), CONFIG)
    assert isinstance(result, RunMetrics)
    assert result.grade == "B"


def test_a_model_no_source_prices_is_accepted_unpriced() -> None:
    result = evaluate_run(encode(make_event(model="mystery-1", cost_usd=None)), CONFIG)
    assert isinstance(result, RunMetrics)
    assert (result.cost_usd, result.cost_of_pass, result.cost_source) == (None, None, "unpriced")


def test_configured_price_prices_a_new_model() -> None:
    config = CoreConfig(pricing={"Mystery-1": {"input": 1.0, "output": 2.0}})
    result = evaluate_run(encode(make_event(model="mystery-1", cost_usd=None)), config)
    assert isinstance(result, RunMetrics)
    assert result.cost_usd == pytest.approx((100 * 1.0 + 200 * 2.0) / 1e6)


def test_configured_size_limit() -> None:
    raw = encode(make_event())
    result = evaluate_run(raw, CoreConfig(max_message_bytes=100))
    assert isinstance(result, Rejection)
    assert result.reason == "too_large"


@pytest.mark.parametrize(
    ("raw", "encoding"),
    [
        (b'{"broken": ', "utf-8"),
        ('{"run_id": "caf\u00e9 \u2603"}\r'.encode(), "utf-8"),
        (b"\xff\xfe\x00binary\x80", "base64"),
        (b"", "utf-8"),
    ],
)
def test_dead_letter_keeps_original_bytes(raw: bytes, encoding: str) -> None:
    rejection = evaluate_run(raw, CONFIG)
    assert isinstance(rejection, Rejection)
    origin = MessageOrigin(topic="run-completed", partition=3, offset=42)
    letter = make_dead_letter(raw, rejection, origin, now=datetime(2026, 1, 1, tzinfo=UTC))
    assert letter.payload_encoding == encoding
    assert letter.payload_size == len(raw)
    assert letter.original_bytes() == raw
    # And through JSON, as it travels on the DLQ topic:
    back = DeadLetter.model_validate_json(letter.model_dump_json())
    assert back.original_bytes() == raw
    assert back.origin.offset == 42
    if encoding == "base64":
        assert base64.b64decode(back.payload) == raw
