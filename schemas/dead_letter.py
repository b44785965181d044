"""A rejected input message, kept with its original bytes so that nothing is silently dropped."""

from __future__ import annotations

import base64
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG, RejectReason


class MessageOrigin(BaseModel):
    """Where a message came from: a Kafka position, or a file line."""

    model_config = OUTPUT_MODEL_CONFIG

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    key: str | None = Field(default=None, description="The message key, when it was UTF-8 text.")
    file: str | None = None
    line: int | None = Field(default=None, description="1-based physical line number.")


class DeadLetter(BaseModel):
    """Published to `run-completed.dlq`. `payload` holds the original bytes exactly: as text when
    they are valid UTF-8, else base64 (`payload_encoding`)."""

    model_config = OUTPUT_MODEL_CONFIG

    reason: RejectReason
    detail: Any = Field(description="pydantic's error list for `schema`; a short object otherwise.")
    payload: str
    payload_encoding: Literal["utf-8", "base64"]
    payload_size: int
    origin: MessageOrigin
    rejected_at: AwareDatetime

    def original_bytes(self) -> bytes:
        """The rejected message, byte for byte."""
        if self.payload_encoding == "base64":
            return base64.b64decode(self.payload)
        return self.payload.encode("utf-8")


def encode_payload(raw: bytes) -> tuple[str, Literal["utf-8", "base64"]]:
    """Text when the bytes are UTF-8, else base64: either way they decode back exactly."""
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), "base64"
