"""What a source read but could make no event of: a malformed run directory, an unreadable log,
a refused sample; reported once, with its reason."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Skipped:
    """A run (or experiment, or log) that made no event, reported once."""

    path: Path
    reason: str
    detail: str

    def line(self) -> str:
        """One line for the user."""
        return f"skipped {self.path}: {self.reason}: {self.detail}"
