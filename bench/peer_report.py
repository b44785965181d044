"""How a benchmark peer reports: it counts the events it handled and, at the target count, writes
{"events", "seconds"} (first to last event) for `bench/run.py`, then stops itself with SIGTERM.
Shared by the Faust baselines and the Quix peer, which run in different virtualenvs: this file
needs nothing but the standard library (each script's own folder is on its import path)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path


class PeerReport:
    """Counts handled events; reports and stops once `events` were seen."""

    def __init__(self, events: int, path: Path) -> None:
        self.events = events
        self.path = path
        self.count = 0
        self.first = 0.0

    def seen(self) -> None:
        """One more event handled."""
        if self.count == 0:
            self.first = time.perf_counter()
        self.count += 1
        if self.count == self.events:
            seconds = time.perf_counter() - self.first
            self.path.write_text(json.dumps({"events": self.events, "seconds": seconds}))
            os.kill(os.getpid(), signal.SIGTERM)
