"""inspect_ai logs (`.eval` and `.json`, as inspect_ai writes them) as `run-completed` events,
read through inspect_ai's own reader (the `inspect` extra): each finished sample and epoch one
run (`inspect_run`), in window order, so that `replay LOGDIR` equals a worker fed the same
samples in any order. A log still being written gives the samples it holds."""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import Any, Final

from stream_app.errors import UserError
from stream_app.sources.inspect_run import (
    EvalHeader,
    Refused,
    SampleResult,
    run_event,
)
from stream_app.sources.run_mapping import RunMapping
from stream_app.sources.skipped import Skipped

INSTALL_HINT: Final = (
    "reading inspect_ai logs needs the inspect extra: pip install 'evalstream[inspect]'"
)
_JSON_HEAD_BYTES: Final = 4096
NOT_LOGS: Final = frozenset({"logs.json", "eval-set.json"})
"""What `eval_set` writes beside its logs: an index and its own state, not logs."""
SCORE_WORDS: Final = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
"""inspect_ai's CORRECT, INCORRECT, PARTIAL and NOANSWER."""
MAX_LOG_READ_BYTES: Final = 512 * 2**20
"""The most a log may make inspect_ai's reader take in: a `.json` log's size, an `.eval`'s members
but the samples' (which the summaries spare), uncompressed. A zip declaring more (a bomb, or a
log no machine here should parse whole) is skipped, not read into memory."""


def log_files(root: Path) -> list[Path]:
    """The inspect_ai logs under `root` (links to directories not followed): every `.eval`
    file (a zip), and every `.json` file whose head is an inspect_ai log's (a `version`, an
    `eval` and a `status`), by path."""
    found = []
    for folder, _, names in os.walk(root, followlinks=False):
        for name in names:
            path = Path(folder, name)
            if name in NOT_LOGS or not path.is_file():  # a FIFO would block the read below
                continue
            if name.endswith(".eval") or (name.endswith(".json") and _looks_like_a_log(path)):
                found.append(path)
    return sorted(found)


def _looks_like_a_log(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            head = file.read(_JSON_HEAD_BYTES)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and all(
        key in head for key in (b'"version"', b'"status"', b'"eval"')
    )


def header_of(spec: Any) -> EvalHeader:
    """An inspect_ai `EvalSpec` as the mapping reads it."""
    return EvalHeader(
        eval_id=spec.eval_id,
        task=spec.task,
        task_args=dict(spec.task_args_passed or {}),
        model=spec.model,
        metadata=dict(spec.metadata or {}),
        eval_set_id=spec.eval_set_id,
    )


def score_value(name: str, value: Any) -> float:
    """A score as a number: inspect_ai's letters (CORRECT is 1, PARTIAL 0.5), a boolean, or a
    finite number; anything else (a dict, a list, other text, NaN) is refused, where inspect_ai's
    own `value_to_float` would read it as 0 with a warning."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and value.strip().upper() in SCORE_WORDS:
        return SCORE_WORDS[value.strip().upper()]
    raise Refused("bad_score", f"score {name!r} is {value!r:.80}, not a number or C/I/P/N")


def sample_of(summary: Any, model: str) -> SampleResult:
    """An inspect_ai sample (a log's summary, or the hook's `EvalSample`) as the mapping reads
    it: its scores as numbers, the evaluated model's usage (not the graders'), times and error."""
    scores = {
        name: score_value(name, score.value) for name, score in (summary.scores or {}).items()
    }
    usage = summary.model_usage.get(model) if summary.model_usage else None
    error = getattr(summary.error, "message", summary.error)  # a log's text, a live EvalError
    return SampleResult(
        sample_id=summary.id,
        epoch=summary.epoch,
        scores=scores,
        usage=usage.model_dump() if usage is not None else {},
        started_at=summary.started_at,
        completed_at=summary.completed_at,
        error=None if error is None else str(error),
        uuid=getattr(summary, "uuid", None),
    )


def read_size(path: Path) -> int:
    """What reading `path`'s header and summaries takes in, by the sizes the file declares (a
    zip member never yields more than its declared size: zipfile stops there)."""
    if path.suffix != ".eval":
        return path.stat().st_size
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
    return sum(m.file_size for m in members if not m.filename.startswith("samples/"))  # ints


def log_events(path: Path, mapping: RunMapping) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """The finished samples of one log as events (a sample still running is left for a later
    read), and what made none."""
    try:
        from inspect_ai.log import read_eval_log, read_eval_log_sample_summaries
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    try:
        size = read_size(path)
    except (OSError, zipfile.BadZipFile) as exc:
        return [], [Skipped(path, "unreadable_log", str(exc) or type(exc).__name__)]
    if size > MAX_LOG_READ_BYTES:
        detail = f"reading it takes in {size:,} bytes, over {MAX_LOG_READ_BYTES:,}"
        return [], [Skipped(path, "too_large", detail)]
    try:
        if path.suffix == ".json":
            # Read whole, once: inspect_ai's reader of a JSON log's summaries returns the last
            # log it read from that path, so a log rewritten since (each of an eval's
            # snapshots, then its end) would come back as it was, its new samples unseen.
            log = read_eval_log(str(path))
            header = header_of(log.eval)
            summaries = [sample.summary() for sample in log.samples or []]
        else:
            header = header_of(read_eval_log(str(path), header_only=True).eval)
            summaries = read_eval_log_sample_summaries(str(path))
    except Exception as exc:
        return [], [Skipped(path, "unreadable_log", str(exc) or type(exc).__name__)]
    events: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    for summary in summaries:
        if not summary.completed:
            continue
        try:
            events.append(run_event(header, sample_of(summary, header.model), mapping))
        except Refused as refused:
            where = f"sample {summary.id} epoch {summary.epoch}: {refused.detail}"
            skipped.append(Skipped(path, refused.reason, where))
        except Exception as exc:  # a value no mapping expects: this sample's problem alone
            where = f"sample {summary.id} epoch {summary.epoch}: {type(exc).__name__}: {exc}"
            skipped.append(Skipped(path, "malformed", where))
    return events, skipped
