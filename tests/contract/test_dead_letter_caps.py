"""Issue 9: a dead letter always fits in one message, whatever the rejected payload holds."""

import base64
import hashlib
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.dead_letter import (
    DEAD_LETTER_PAYLOAD_CAP,
    DETAIL_CAP,
    KEY_CAP,
    DeadLetter,
    MessageOrigin,
    dead_letter_max_bytes,
    encode_payload,
)
from stream_app.core.config import CoreConfig
from stream_app.core.ingest import Rejection, evaluate_run, make_dead_letter
from stream_app.service.settings import PRODUCER_MAX_REQUEST_BYTES

CAP = DEAD_LETTER_PAYLOAD_CAP
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def letter_for(raw: bytes, cap: int = CAP, key: str | None = None) -> tuple[DeadLetter, bytes]:
    rejection = evaluate_run(raw, CoreConfig(max_message_bytes=4 * 1024 * 1024))
    assert isinstance(rejection, Rejection)
    origin = MessageOrigin(topic="run-completed", partition=0, offset=1, key=key)
    letter = make_dead_letter(raw, rejection, origin, now=NOW, payload_cap=cap)
    return letter, letter.model_dump_json().encode()


def written_payload_size(written: bytes) -> int:
    """Bytes of the payload field as it stands in the serialized letter (escapes included)."""
    start = written.index(b'"payload":"') + len(b'"payload":"')
    end = written.index(b'","payload_encoding"')
    return end - start


def check(raw: bytes, cap: int = CAP) -> DeadLetter:
    letter, written = letter_for(raw, cap)
    assert written_payload_size(written) <= cap
    assert len(written) <= dead_letter_max_bytes(cap)
    assert letter.payload_size == len(raw)
    assert letter.payload_sha256 == hashlib.sha256(raw).hexdigest()
    back = DeadLetter.model_validate_json(written)
    kept = back.original_bytes()
    if back.truncated:
        assert raw.startswith(kept)
        assert len(kept) < len(raw)
        assert len(kept) >= cap // 8  # keeps a useful start, not a token byte
    else:
        assert kept == raw
    return back


def test_control_bytes_that_escape_six_times_are_cut_to_the_cap() -> None:
    """The issue's case: 1,000,000 bytes of 0x01 made a 6 MB dead letter."""
    raw = b"\x01" * 1_000_000
    letter = check(raw)
    assert letter.reason == "invalid_json"
    assert letter.truncated
    assert letter.payload_encoding == "utf-8"
    assert len(letter.model_dump_json()) < 1024 * 1024  # fits Apache Kafka's default limit


def test_a_payload_that_escapes_past_the_cap_but_fits_as_base64_is_kept_whole() -> None:
    raw = b"\x01" * 60_000  # 360 kB escaped, 80 kB as base64
    letter = check(raw)
    assert not letter.truncated
    assert letter.payload_encoding == "base64"


def test_invalid_utf8_beyond_the_cap() -> None:
    raw = b"\xff" * (CAP + 10)
    letter = check(raw)
    assert letter.truncated
    assert letter.payload_encoding == "base64"


@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_exactly_at_the_cap(delta: int) -> None:
    raw = b"x" * (CAP + delta)
    letter = check(raw)
    # Plain text up to the cap stays text; one byte more no longer fits as text but does as base64
    # only when base64 fits: here it does not, so the letter is cut.
    assert letter.truncated == (delta > 0)
    escaped = b'"' * (CAP // 2 + delta)  # each quote writes as two bytes
    check(escaped)


def test_text_cut_never_splits_a_character() -> None:
    raw = ("é" * CAP).encode()  # two bytes a character
    letter = check(raw)
    assert letter.truncated
    assert letter.payload == "é" * (CAP // 2)


def test_huge_detail_and_key_are_capped() -> None:
    rejection = Rejection("processing_error", {"stage": "window", "error": "x" * 500_000})
    origin = MessageOrigin(topic="t", key="k" * KEY_CAP)
    letter = make_dead_letter(b"{}", rejection, origin, now=NOW)
    written = letter.model_dump_json().encode()
    assert len(written) <= dead_letter_max_bytes(CAP)
    assert letter.detail["truncated"] is True
    assert len(json.dumps(letter.detail)) <= DETAIL_CAP


def test_the_bound_fits_the_producer_limit_for_every_allowed_cap() -> None:
    assert dead_letter_max_bytes(2 * 1024 * 1024) < PRODUCER_MAX_REQUEST_BYTES


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=3000)
    | st.text(max_size=1500).map(lambda t: t.encode("utf-8", "surrogatepass"))
    | st.sampled_from([b"\x00", b"\x1f", b'"', b"\\", "\u2028".encode(), b"\x7f"]).map(
        lambda b: b * 700
    ),
    st.integers(min_value=64, max_value=2048),
)
def test_any_payload_any_cap(raw: bytes, cap: int) -> None:
    payload, encoding, truncated = encode_payload(raw, cap)
    assert len(json.dumps(payload, ensure_ascii=False).encode()) - 2 <= cap
    kept = base64.b64decode(payload) if encoding == "base64" else payload.encode()
    assert (kept == raw) if not truncated else raw.startswith(kept)
