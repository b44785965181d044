"""A rejected message, kept with its original bytes so that nothing is silently dropped.

A dead letter must always fit in one Kafka message, whatever it carries: a payload of control
bytes escapes to six times its size in JSON, so a 1 MB input would make a 6 MB dead letter that no
broker takes. The payload, the detail and the key are therefore capped as they will be *written*
(`DEAD_LETTER_PAYLOAD_CAP` by default, escapes counted); above the cap the letter keeps the first
bytes, the original size and the SHA-256 of the whole payload, and says `truncated: true`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, RejectReason

DEAD_LETTER_PAYLOAD_CAP: Final = 256 * 1024
"""Default cap of the written `payload` field, in bytes."""
DETAIL_CAP: Final = 16 * 1024
"""Cap of the written `detail` (pydantic's error list, an exception's message)."""
KEY_CAP: Final = 1024
"""Cap of the message key kept in `origin.key` (and of the dead letter's own record key)."""
ENVELOPE_BYTES: Final = 4 * 1024
"""Generous bound of everything else in a dead letter (names, numbers, time, escapes of the key)."""


def dead_letter_max_bytes(payload_cap: int) -> int:
    """The largest a serialized dead letter can be with that payload cap."""
    return payload_cap + DETAIL_CAP + 6 * KEY_CAP + ENVELOPE_BYTES


class MessageOrigin(BaseModel):
    """Where a message came from: a Kafka position, or a file line."""

    model_config = OUTPUT_MODEL_CONFIG

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    key: str | None = Field(
        default=None,
        description="The message key, when it was UTF-8 text; its first 1024 bytes when longer.",
    )
    file: str | None = None
    line: int | None = Field(default=None, description="1-based physical line number.")


class DeadLetter(BaseModel):
    """Published to `run-completed.dlq`. `payload` holds the original bytes exactly (as text when
    they are valid UTF-8 and fit the cap as text, else base64: `payload_encoding`) unless
    `truncated`, when it holds their first bytes and `payload_sha256` identifies the whole."""

    model_config = OUTPUT_MODEL_CONFIG

    reason: RejectReason
    detail: Any = Field(description="pydantic's error list for `schema`; a short object otherwise.")
    payload: str
    payload_encoding: Literal["utf-8", "base64"]
    payload_size: int = Field(description="Size of the whole original payload in bytes.")
    payload_sha256: str = Field(description="SHA-256 (hex) of the whole original payload.")
    truncated: bool = Field(
        default=False, description="True when `payload` holds only the first bytes."
    )
    origin: MessageOrigin
    rejected_at: AwareDatetime

    def original_bytes(self) -> bytes:
        """The payload's bytes: the whole message unless `truncated`."""
        if self.payload_encoding == "base64":
            return base64.b64decode(self.payload)
        return self.payload.encode("utf-8")


def _written_size(text: str) -> int:
    """Bytes of `text` as a JSON string body (without its quotes)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def _text_prefix(text: str, cap: int) -> str:
    """The longest prefix of `text` whose written size is at most `cap` (a binary search: every
    character writes as 1 to 6 bytes, so the answer lies between cap // 6 and cap characters)."""
    low, high = min(len(text), cap // 6), min(len(text), cap)
    if _written_size(text[:high]) <= cap:
        return text[:high]
    while low < high:  # invariant: text[:low] fits, text[:high + 1] does not
        mid = (low + high + 1) // 2
        if _written_size(text[:mid]) <= cap:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def encode_payload(
    raw: bytes, cap: int = DEAD_LETTER_PAYLOAD_CAP
) -> tuple[str, Literal["utf-8", "base64"], bool]:
    """(payload, encoding, truncated) with the payload's written size at most `cap`: the whole
    message as text, else as base64, else its first bytes (text when they are UTF-8)."""
    try:
        text: str | None = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and len(text) <= cap and _written_size(text) <= cap:
        return text, "utf-8", False
    if (len(raw) + 2) // 3 * 4 <= cap:
        return base64.b64encode(raw).decode("ascii"), "base64", False
    if text is not None:
        return _text_prefix(text, cap), "utf-8", True
    return base64.b64encode(raw[: cap // 4 * 3]).decode("ascii"), "base64", True


def cap_detail(detail: Any) -> Any:
    """The detail itself when it writes as at most `DETAIL_CAP` bytes, else its JSON's start."""
    written = json.dumps(detail, ensure_ascii=False, default=str)
    if len(written.encode("utf-8")) <= DETAIL_CAP:
        return detail
    return {"truncated": True, "json": _text_prefix(written, DETAIL_CAP - 64)}


def cap_key(key: bytes | None) -> bytes | None:
    """A message key cut to `KEY_CAP` bytes (a key is the contract's business only for routing)."""
    return key if key is None or len(key) <= KEY_CAP else key[:KEY_CAP]


def payload_digest(raw: bytes) -> str:
    """The SHA-256 of the original bytes, so a dead letter identifies its payload even if cut."""
    return hashlib.sha256(raw).hexdigest()
