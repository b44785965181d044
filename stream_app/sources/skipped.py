"""What a source read but could make no event of (a malformed run directory, an unreadable log,
a refused sample): raised as `NoEvent`, reported once as `Skipped`, with its reason."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class NoEvent(Exception):
    """A run that cannot become an event: `reason` is a short code, `detail` one line."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Skipped:
    """A run (or experiment, or log) that made no event, reported once."""

    path: Path
    reason: str
    detail: str

    def line(self) -> str:
        """One line for the user."""
        return f"skipped {self.path}: {self.reason}: {self.detail}"
