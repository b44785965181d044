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


def result_files(root: Path) -> list[Path]:
    """Every `result.json` under `root`, trials' and jobs' alike, found without reading one: the
    watcher lists them at each file event and reads only those that changed (`trial_events`
    passes a job's over). Links are not followed; a FIFO is no file (its read would block)."""
    paths = (Path(folder, RESULT) for folder, _, names in os.walk(root) if RESULT in names)
    return sorted(path for path in paths if path.is_file())


def trial_results(root: Path) -> list[Path]:
    """The `result.json` files under `root` that are a Harbor trial's, or cannot be read (then
    its trial is said skipped); a job's own is left out."""
    return [p for p in result_files(root) if (r := _read(p)) is UNREADABLE or is_trial(r)]


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
    if result is UNREADABLE:
        detail = f"{RESULT} is not JSON, over {MAX_RESULT_BYTES:,} bytes, or nested too deep"
        return [], [Skipped(path.parent, "unreadable_result", detail)]
    if not is_trial(result):  # the job's own
        return [], []
    try:
        return [run_event(result, mapping)], []
    except NoEvent as refused:
        return [], [Skipped(path.parent, refused.reason, refused.detail)]
    except Exception as exc:  # a value no mapping expects: this trial's problem alone
        return [], [Skipped(path.parent, "malformed", f"{type(exc).__name__}: {exc}")]
