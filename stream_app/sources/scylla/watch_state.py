"""What a watcher has published, so that a restart re-sends nothing.

One run_id per line (a JSON string), appended and fsynced only after the broker acknowledged the
runs (`acks=all`). A crash between the acknowledgement and the append re-sends those runs on the
next start; the worker drops them as duplicates (`run_id` is the idempotency key), so the effect
is exactly once. A torn last line (a crash mid-append) is ignored, and the file is rewritten
compactly, through a temporary file and a rename, when it is opened."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path


def default_state_path(broker_url: str, topic: str) -> Path:
    """One state file per destination (broker and topic), under `$XDG_STATE_HOME/evalstream`:
    pointing the watcher at another broker publishes everything there too."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    digest = hashlib.sha256(f"{broker_url}\n{topic}".encode()).hexdigest()[:16]
    return Path(base, "evalstream", f"watch-{digest}.jsonl")


class WatchState:
    """The set of published run_ids, backed by an append-only file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run_ids: set[str] = set()
        lines = 0
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        for line in data.splitlines():
            try:
                run_id = json.loads(line)
            except ValueError:
                continue  # a torn last line: that run is simply sent again
            if isinstance(run_id, str):
                self.run_ids.add(run_id)
            lines += 1
        path.parent.mkdir(parents=True, exist_ok=True)
        if lines != len(self.run_ids) or (data and not data.endswith(b"\n")):
            self._rewrite()
        self._file = path.open("ab")

    def _rewrite(self) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        with temporary.open("wb") as file:
            file.writelines(_line(r) for r in sorted(self.run_ids))
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(self.path)

    def add(self, run_ids: Iterable[str]) -> None:
        """Record runs the broker acknowledged; durable when this returns."""
        new = [r for r in run_ids if r not in self.run_ids]
        if not new:
            return
        self._file.writelines(_line(r) for r in new)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.run_ids.update(new)

    def close(self) -> None:
        """Close the file (everything added is already on disk)."""
        with contextlib.suppress(OSError):
            self._file.close()


def _line(run_id: str) -> bytes:
    return json.dumps(run_id).encode() + b"\n"
