"""The records of the worker's output topics, read one way for `stream-app tail` and the demo's
live table: which topic holds which kind of record, each decoded into its schema, printed as one
readable line or as one JSON line. A pass rate and a difference from the baseline read the same
in tail's lines and in the table."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from pydantic import BaseModel, ValidationError

from schemas.aggregates import CumulativeStats, DropStatus, TierAggregate
from schemas.cross_tier import CrossTierReport, Difference
from schemas.dead_letter import DeadLetter
from schemas.grade_change import GradeChange
from schemas.suites import SuiteDifference, SuiteEstimate, SuiteTier
from stream_app import bounded_json
from stream_app.terminal.text import printable

if TYPE_CHECKING:
    from stream_app.service.settings import Settings

Kind = Literal["aggregates", "grade_changes", "cross_tier", "suite_tiers", "dead_letter"]

SHORT_NAMES: Final[dict[str, Kind]] = {
    "aggregates": "aggregates",
    "grades": "grade_changes",
    "reports": "cross_tier",
    "dlq": "dead_letter",
    "suites": "suite_tiers",
}
"""The names a user types; the configured topic names (`topics.*`) are accepted too."""

MODELS: Final[dict[Kind, type[BaseModel]]] = {
    "aggregates": TierAggregate,
    "grade_changes": GradeChange,
    "cross_tier": CrossTierReport,
    "suite_tiers": SuiteTier,
    "dead_letter": DeadLetter,
}
DETAIL_CHARS: Final = 160
PREVIEW_BYTES: Final = 80
NOT_SIGNIFICANT: Final = "~"


class KafkaRecord(Protocol):
    """The fields of an aiokafka `ConsumerRecord` that are printed."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def output_kinds(settings: Settings) -> dict[str, Kind]:
    """The configured output topics, each with the kind of record it holds."""
    topics = settings.topics
    return {
        topics.aggregates: "aggregates",
        topics.grade_changes: "grade_changes",
        topics.cross_tier: "cross_tier",
        topics.suite_tiers: "suite_tiers",
        topics.dead_letter: "dead_letter",
    }


def decode(kind: Kind, value: bytes) -> BaseModel:
    """A record's value as the schema of its kind.

    Raises:
        ValidationError: the value is not what a topic of that kind holds.
    """
    return MODELS[kind].model_validate_json(value)


def _points(value: float, sign: str = "") -> str:
    """A share as percentage points with one decimal (`sign` "+" to always show the sign)."""
    return f"{100 * value:{sign}.1f}"


def pass_rate_text(cumulative: CumulativeStats) -> str:
    """The pass rate over every run of the tier, in %, with its anytime-valid interval:
    `73.2 [65.1, 80.3]`."""
    low, high = cumulative.pass_rate_interval.low, cumulative.pass_rate_interval.high
    return f"{_points(cumulative.pass_rate)} [{_points(low)}, {_points(high)}]"


def suite_figure_text(figure: SuiteEstimate | None) -> str:
    """A suite tier's pass rate (or mean composite), in %, with its interval; "—" before a
    run."""
    if figure is None:
        return "—"
    return f"{_points(figure.estimate)} [{_points(figure.low)}, {_points(figure.high)}]"


Compared = Difference | SuiteDifference
"""A difference from the baseline: an experiment's or a suite's."""


def experiments_paired(report: SuiteTier) -> str:
    """What a suite tier's figures cover: "3 experiments paired" (with the baseline), or for
    the baseline "3 experiments"."""
    count = f"{report.experiments} experiment{'' if report.experiments == 1 else 's'}"
    return count if report.tier == report.baseline_tier else f"{count} paired"


def difference_text(difference: Compared) -> str:
    """A difference from the baseline in percentage points with its interval, and `~` when the
    interval holds 0 (not significant): `+20.1 [+8.3, +31.0]`, `+2.0 [-9.5, +13.4] ~`."""
    text = (
        f"{_points(difference.estimate, '+')} "
        f"[{_points(difference.low, '+')}, {_points(difference.high, '+')}]"
    )
    return text if difference.significant else f"{text} {NOT_SIGNIFICANT}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _key(record: KafkaRecord) -> str:
    return printable(record.key.decode("utf-8", "replace")) if record.key is not None else "-"


def _drop(drop: DropStatus) -> str:
    """The drop detectors: warming up, or each one's evidence (1 pages), and DROPPED."""
    if not drop.monitoring:
        return "drop detectors warming up"
    evidence = " ".join(f"{detector} {ratio:.2f}" for detector, ratio in drop.evidence.items())
    return f"DROPPED (evidence {evidence})" if drop.dropped else f"drop evidence {evidence}"


def aggregate_line(agg: TierAggregate) -> str:
    """A tier's aggregate: grade, window, pass rate over all its runs, its drop detectors."""
    filling = " (filling)" if agg.runs < agg.capacity else ""
    cumulative = agg.cumulative
    return (
        f"{printable(agg.experiment_id)}/{agg.tier}  grade {agg.grade}  "
        f"median composite {agg.composite_score.median:.3f}  "
        f"window {agg.runs}/{agg.capacity}{filling}  "
        f"all {cumulative.runs} runs: pass % {pass_rate_text(cumulative)}  {_drop(agg.drop)}"
    )


def suite_line(report: SuiteTier) -> str:
    """A suite's tier: its pass rate and mean composite over the suite's experiments and their
    differences from the baseline with their intervals, the experiments they cover, its runs,
    and its drop detectors (each one's evidence, 1 pages), DROPPED when they paged (what
    `SuiteTierDropped` pages on)."""
    evidence = " ".join(f"{d} {ratio:.2f}" for d, ratio in report.drop.evidence.items())
    evidence = evidence or "none yet"
    drop = f"DROPPED (evidence {evidence})" if report.drop.dropped else f"drop evidence {evidence}"
    return (
        f"suite {printable(report.suite)}/{printable(report.tier)}  "
        f"pass {suite_figure_text(report.pass_rate)}  "
        f"{_versus(report, report.pass_rate_difference)}  "
        f"composite {suite_figure_text(report.mean_composite)}  "
        f"{_versus(report, report.mean_composite_difference)}  "
        f"{experiments_paired(report)}, {report.runs} runs  {drop}"
    )


def _versus(report: SuiteTier, difference: SuiteDifference | None) -> str:
    """A suite figure's difference from the baseline, "baseline" for the baseline itself."""
    if report.tier == report.baseline_tier:
        return "baseline"
    if difference is None:
        return f"vs {report.baseline_tier} —"
    return f"vs {report.baseline_tier} {difference_text(difference)}"


def _grade_change(change: GradeChange) -> str:
    return (
        f"{printable(change.experiment_id)}/{change.tier}  "
        f"{change.previous_grade}→{change.grade}  {change.direction}  "
        f"median composite {change.composite_median:.3f}  run {printable(change.run_id)}  "
        f"at {change.at.isoformat()}"
    )


def _uplift(value: float | None) -> str:
    if value is None:
        return "n/a (baseline composite 0)"
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return f"{value:+.1%}"


def _report(report: CrossTierReport) -> str:
    head = f"{printable(report.experiment_id)}  uplift over {report.baseline_tier}:"
    if not report.tier_uplift:
        return f"{head} none yet (no {report.baseline_tier} aggregate)"
    parts = [f"{tier} {_uplift(value)}" for tier, value in report.tier_uplift.items()]
    line = f"{head} " + "  ".join(parts)
    if report.pass_rate_difference:
        differences = "  ".join(
            f"{tier} {difference_text(d)}" for tier, d in report.pass_rate_difference.items()
        )
        line += f"  pass % vs {report.baseline_tier}, points: {differences}"
    return line


def _detail(detail: Any) -> str:
    """A schema error list as `loc: msg; …`; anything else as compact JSON; cut short."""
    if isinstance(detail, list) and all(
        isinstance(e, dict) and "loc" in e and "msg" in e for e in detail
    ):
        text = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'event'}: {e['msg']}" for e in detail
        )
    else:
        text = json.dumps(detail, ensure_ascii=False, separators=(",", ":"))
    return _cut(printable(text), DETAIL_CHARS)


def _origin(letter: DeadLetter) -> str:
    origin = letter.origin
    if origin.topic is not None:
        return f"{printable(origin.topic)}[{origin.partition}]@{origin.offset}"
    if origin.file is not None:
        return f"{printable(origin.file)}:{origin.line}"
    return "unknown"


def _bytes_literal(raw: bytes) -> str:
    r"""`raw` quoted as one line, its UTF-8 text as it is and everything else escaped once: a byte
    that is not UTF-8 as `\xff`, a control character as `\n`, `\x00` or `\u2028`, and the quote
    and the backslash with a backslash."""
    parts = []
    for ch in raw.decode("utf-8", "surrogateescape"):
        if "\udc80" <= ch <= "\udcff":  # a byte surrogateescape could not decode
            parts.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch in "'\\":
            parts.append("\\" + ch)
        elif ch.isprintable():
            parts.append(ch)
        else:
            parts.append(repr(ch)[1:-1])
    return "'" + "".join(parts) + "'"


def _dead_letter(letter: DeadLetter) -> str:
    raw = letter.original_bytes()
    preview = _bytes_literal(raw[:PREVIEW_BYTES])
    more = "…" if letter.payload_size > PREVIEW_BYTES else ""
    return (
        f"{letter.reason}  {_detail(letter.detail)}  from {_origin(letter)}  "
        f"bytes: {preview}{more} ({letter.payload_size} bytes)"
    )


FORMATS: Final[dict[Kind, Callable[[Any], str]]] = {
    "aggregates": aggregate_line,
    "grade_changes": _grade_change,
    "cross_tier": _report,
    "suite_tiers": suite_line,
    "dead_letter": _dead_letter,
}


def format_record(kind: Kind, record: KafkaRecord) -> str:
    """One readable line for a record of a `kind` topic; a tombstone is a retired key, and a
    record that is not what the topic should hold is said, not fatal."""
    if record.value is None:
        return f"{_key(record)}  retired"
    try:
        value = decode(kind, record.value)
    except ValidationError as exc:
        why = _cut(printable(str(exc.errors()[0].get("msg", exc))), DETAIL_CHARS)
        return f"[{record.partition}]@{record.offset} not a {MODELS[kind].__name__}: {why}"
    try:
        return FORMATS[kind](value)
    except ValueError as exc:  # a valid dead letter whose base64 payload does not decode
        why = _cut(printable(str(exc)), DETAIL_CHARS)
        return f"[{record.partition}]@{record.offset} unreadable {MODELS[kind].__name__}: {why}"


def _finite(number: str) -> float:
    value = float(number)
    if not math.isfinite(value):
        raise ValueError(f"{number} is out of range of a double")
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _dumps(doc: dict[str, Any]) -> str:
    r"""`doc` as one strict JSON line, text as it is.

    Raises:
        ValueError: `doc` holds a NaN or an infinity, or a lone surrogate (a JSON string can
            escape one, `"\ud800"`), which UTF-8 cannot write and jq rejects as an escape.
    """
    line = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    line.encode("utf-8")
    return line


def json_line(record: KafkaRecord) -> str:
    """A record as one JSON line: where it is, its key, and its value. `value` is the record's
    JSON (null for a tombstone); a value that is not JSON is `value_text` when it is UTF-8 text
    and `value_base64` otherwise, so a text record never looks like a JSON string. Not JSON here
    means what would not print as strict JSON: NaN, Infinity, a number beyond a double (`1e999`),
    a string with a lone surrogate, or nesting deeper than `bounded_json.MAX_DEPTH` (the same on
    every Python)."""
    key = record.key.decode("utf-8", "replace") if record.key is not None else None
    head: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": key,
    }
    if record.value is None:
        return _dumps({**head, "value": None})
    try:
        text = record.value.decode("utf-8")
    except UnicodeDecodeError:
        return _dumps({**head, "value_base64": base64.b64encode(record.value).decode("ascii")})
    try:
        value = bounded_json.loads(text, parse_float=_finite, parse_constant=_not_json)
        return _dumps({**head, "value": value})
    except (ValueError, RecursionError):
        return _dumps({**head, "value_text": text})
