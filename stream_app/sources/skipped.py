"""What a source read but could make no event of (a malformed run directory, an unreadable log,
a refused sample): raised as `NoEvent`, reported once as `Skipped`, with its reason."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from stream_app.terminal.text import printable

SHOWN_PER_CAUSE: Final = 3
"""Lines said per (path, reason): an eval of a thousand samples without a tier is one cause."""


class Said(Protocol):
    """A skipped run as a source reports it, or as a replay report lists it."""

    @property
    def path(self) -> object:
        """The run directory, log or file."""

    @property
    def reason(self) -> str:
        """A short code."""

    @property
    def detail(self) -> str:
        """One line."""


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


def skipped_lines(skipped: Iterable[Said]) -> list[str]:
    """One line for each of the first `SHOWN_PER_CAUSE` runs of each (path, reason), then how many
    more; made printable (a hostile log's sample ids could drive the terminal). The report, not
    these lines, lists every one."""
    lines: list[str] = []
    counts: dict[tuple[str, str], int] = {}
    for run in skipped:
        cause = (str(run.path), run.reason)
        counts[cause] = counts.get(cause, 0) + 1
        if counts[cause] <= SHOWN_PER_CAUSE:
            lines.append(printable(f"skipped {run.path}: {run.reason}: {run.detail}"))
    for (path, reason), count in counts.items():
        if count > SHOWN_PER_CAUSE:
            more = count - SHOWN_PER_CAUSE
            lines.append(printable(f"skipped {path}: {reason}: {more} more like it"))
    return lines
