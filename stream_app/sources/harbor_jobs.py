"""Harbor jobs as `run-completed` events: every trial's `result.json` under a directory (Harbor
writes `jobs/<job>/<trial>/result.json` when the trial ends), each one run (`harbor_trial`), in
window order. Read from the JSON alone, with no Harbor import."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

from stream_app.sources.harbor_trial import is_trial, run_event
from stream_app.sources.run_mapping import RunMapping
from stream_app.sources.skipped import NoEvent, Skipped

RESULT: Final = "result.json"
MAX_RESULT_BYTES: Final = 16 * 1024 * 1024
"""A larger result.json is skipped, not read (a trial's is a few kilobytes)."""


def trial_results(root: Path) -> list[Path]:
    """Every `result.json` under `root` that is a Harbor trial's, or cannot be read (then its
    trial is said skipped); a job's own `result.json` is left out. Links are not followed."""
    found = []
    for folder, _, names in os.walk(root, followlinks=False):
        path = Path(folder, RESULT)
        if RESULT in names and path.is_file():  # a FIFO would block the read
            result = _read(path)
            if result is UNREADABLE or is_trial(result):
                found.append(path)
    return sorted(found)


def result_files(root: Path) -> list[Path]:
    """Every `result.json` under `root`, trials' and jobs' alike, found without reading one: the
    watcher lists them at each file event and reads only those that changed (`trial_events`
    passes a job's over). Links are not followed."""
    return sorted(
        Path(folder, RESULT)
        for folder, _, names in os.walk(root, followlinks=False)
        if RESULT in names and Path(folder, RESULT).is_file()
    )


UNREADABLE: Final = object()
"""What `_read` gives for a file too large, not JSON, or nested too deep."""


def _read(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            return UNREADABLE
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return UNREADABLE


def trial_events(path: Path, mapping: RunMapping) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """One trial's `result.json` as its event, or what made none; a job's own, nothing."""
    result = _read(path)
    if result is not UNREADABLE and not is_trial(result):
        return [], []
    if result is UNREADABLE:
        detail = f"{RESULT} is not JSON, over {MAX_RESULT_BYTES:,} bytes, or nested too deep"
        return [], [Skipped(path.parent, "unreadable_result", detail)]
    try:
        return [run_event(result, mapping)], []
    except NoEvent as refused:
        return [], [Skipped(path.parent, refused.reason, refused.detail)]
    except Exception as exc:  # a value no mapping expects: this trial's problem alone
        return [], [Skipped(path.parent, "malformed", f"{type(exc).__name__}: {exc}")]
