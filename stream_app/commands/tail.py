"""`stream-app tail TOPIC`: print the records of an output topic as they arrive, one readable line
each (or a JSON line with `--json`), to see what the worker publishes without a Kafka console.

It reads with a plain aiokafka consumer that belongs to no group and commits nothing, so it
never disturbs the worker's group or any other consumer. By default it starts at the end of
every partition (new records only); `--from-beginning` reads what the topic holds first.
`--max` and `--timeout` let scripts and tests end it; Ctrl-C ends it cleanly.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TextIO

from aiokafka.errors import TopicAuthorizationFailedError
from pydantic import BaseModel, ValidationError

from schemas.aggregates import DropStatus, TierAggregate
from schemas.cross_tier import CrossTierReport
from schemas.dead_letter import DeadLetter
from schemas.grade_change import GradeChange
from stream_app.commands.live_table import difference_text, pass_rate_text
from stream_app.commands.terminal_text import printable
from stream_app.service.kafka_client import (
    DENIED,
    client_kwargs,
    denied,
    topic_denied,
    topic_partitions,
    wait_for_broker,
)
from stream_app.service.settings import Settings

Kind = Literal["aggregates", "grade_changes", "cross_tier", "dead_letter"]

SHORT_NAMES: Final[dict[str, Kind]] = {
    "aggregates": "aggregates",
    "grades": "grade_changes",
    "reports": "cross_tier",
    "dlq": "dead_letter",
}
"""The names a user types; the configured topic names (`topics.*`) are accepted too."""

MODELS: Final[dict[Kind, type[BaseModel]]] = {
    "aggregates": TierAggregate,
    "grade_changes": GradeChange,
    "cross_tier": CrossTierReport,
    "dead_letter": DeadLetter,
}
DETAIL_CHARS: Final = 160
PREVIEW_BYTES: Final = 80
BROKER_TRIES: Final = 5
TOPIC_POLL_S: Final = 0.5


class TailError(Exception):
    """A topic name tail does not know, or a topic it cannot read; one line for the user."""


class KafkaRecord(Protocol):
    """The fields of an aiokafka `ConsumerRecord` that tail prints."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class TailTopic:
    """A topic to tail and what its records are."""

    topic: str
    kind: Kind


@dataclass(frozen=True)
class TailOptions:
    """What the user chose on the `stream-app tail` command line."""

    name: str
    from_beginning: bool = False
    max_records: int | None = None
    timeout_s: float | None = None
    as_json: bool = False


@dataclass
class TailProgress:
    """How far a tail got: whether it reached the broker, and how many records it printed."""

    connected: bool = False
    printed: int = 0


def resolve_topic(settings: Settings, name: str) -> TailTopic:
    """The topic a short name (`aggregates`, `grades`, `reports`, `dlq`) or a configured output
    topic name stands for.

    Raises:
        TailError: the name is neither.
    """
    topics = settings.topics
    full: dict[str, Kind] = {
        topics.aggregates: "aggregates",
        topics.grade_changes: "grade_changes",
        topics.cross_tier: "cross_tier",
        topics.dead_letter: "dead_letter",
    }
    kind = SHORT_NAMES.get(name) or full.get(name)
    if kind is None:
        known = ", ".join([*SHORT_NAMES, *full])
        raise TailError(f"unknown topic {name!r}: give one of {known}")
    return TailTopic(getattr(topics, kind), kind)


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


def _aggregate(agg: TierAggregate) -> str:
    filling = " (filling)" if agg.runs < agg.capacity else ""
    cumulative = agg.cumulative
    return (
        f"{printable(agg.experiment_id)}/{agg.tier}  grade {agg.grade}  "
        f"median composite {agg.composite_score.median:.3f}  "
        f"window {agg.runs}/{agg.capacity}{filling}  "
        f"all {cumulative.runs} runs: pass % {pass_rate_text(cumulative)}  {_drop(agg.drop)}"
    )


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
    "aggregates": _aggregate,
    "grade_changes": _grade_change,
    "cross_tier": _report,
    "dead_letter": _dead_letter,
}


def format_record(kind: Kind, record: KafkaRecord) -> str:
    """One readable line for a record of a `kind` topic; a tombstone is a retired key, and a
    record that is not what the topic should hold is said, not fatal."""
    if record.value is None:
        return f"{_key(record)}  retired"
    model = MODELS[kind]
    try:
        value = model.model_validate_json(record.value)
    except ValidationError as exc:
        why = _cut(printable(str(exc.errors()[0].get("msg", exc))), DETAIL_CHARS)
        return f"[{record.partition}]@{record.offset} not a {model.__name__}: {why}"
    try:
        return FORMATS[kind](value)
    except ValueError as exc:  # a valid dead letter whose base64 payload does not decode
        why = _cut(printable(str(exc)), DETAIL_CHARS)
        return f"[{record.partition}]@{record.offset} unreadable {model.__name__}: {why}"


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
    a string with a lone surrogate, or nesting too deep to parse."""
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
        value = json.loads(text, parse_float=_finite, parse_constant=_not_json)
        return _dumps({**head, "value": value})
    except (ValueError, RecursionError):
        return _dumps({**head, "value_text": text})


async def _read(
    settings: Settings,
    target: TailTopic,
    options: TailOptions,
    progress: TailProgress,
    *,
    out: TextIO,
    note: TextIO,
) -> None:
    """Print the topic's records until `max_records`; runs until cancelled otherwise."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    await wait_for_broker(settings, max_attempts=BROKER_TRIES)
    partitions, created_later = await _wait_for_topic(settings, target.topic, progress, note)
    consumer = AIOKafkaConsumer(
        **client_kwargs(settings),
        group_id=None,  # no group: no commits, no rebalance of anyone's partitions
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        # Every record of a topic made after we started is new: read it from its start.
        from_beginning = options.from_beginning or created_later
        tps = [TopicPartition(target.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        if from_beginning:
            await consumer.seek_to_beginning(*tps)
            print(f"tail: {target.topic} from the beginning", file=note, flush=True)
        else:
            await consumer.seek_to_end(*tps)
            print(
                f"tail: {target.topic}, new records only (--from-beginning for all)",
                file=note,
                flush=True,
            )
        while True:
            try:
                batch = await consumer.getmany(timeout_ms=500)
            except DENIED as exc:  # it may describe the topic but not read it
                raise denied(settings, exc) from None
            records = sorted(
                (r for rs in batch.values() for r in rs),
                key=lambda r: (r.timestamp, r.partition, r.offset),
            )
            for record in records:
                line = json_line(record) if options.as_json else format_record(target.kind, record)
                print(line, file=out, flush=True)
                progress.printed += 1
                if options.max_records is not None and progress.printed >= options.max_records:
                    return
    finally:
        await consumer.stop()


async def _wait_for_topic(
    settings: Settings, topic: str, progress: TailProgress, note: TextIO
) -> tuple[set[int], bool]:
    """The partitions of `topic`, once it exists, and whether it had to be waited for.

    Not from the consumer: its `topics()` asks the broker but returns only the names, in a fresh
    metadata object it drops, and `partitions_for_topic()` reads the consumer's own metadata,
    which aiokafka refreshes every five minutes (`metadata_max_age_ms`); only the private
    `_client.force_metadata_update()` refreshes it sooner. The admin client's public
    `describe_topics()` asks the broker on each call. Called with no names it asks for every
    topic, never for this one by name: a broker that auto-creates topics would create a topic
    that a Metadata request names, and `tail` must not create topics."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**client_kwargs(settings))
    await admin.start()
    try:
        progress.connected = True
        partitions = await topic_partitions(admin, topic)
        if partitions:
            return partitions, False
        if await topic_denied(settings, topic):
            raise denied(settings, TopicAuthorizationFailedError(topic))
        print(f"tail: {topic} does not exist yet; waiting for it", file=note, flush=True)
        while not partitions:
            await asyncio.sleep(TOPIC_POLL_S)
            partitions = await topic_partitions(admin, topic)
        return partitions, True
    finally:
        await admin.close()


async def tail(
    settings: Settings,
    options: TailOptions,
    stop: asyncio.Event,
    out: TextIO = sys.stdout,
    note: TextIO = sys.stderr,
) -> int:
    """`stream-app tail`: print records until `max_records`, `timeout_s` or `stop`; returns the
    exit status: 1 when the timeout came before `max_records` records, else 0.

    Raises:
        TailError: an unknown topic name.
        ConnectionError: the broker was not reached (in five tries, or within the timeout).
    """
    target = resolve_topic(settings, options.name)
    progress = TailProgress()
    reading = asyncio.ensure_future(_read(settings, target, options, progress, out=out, note=note))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait(
            (reading, stopping), timeout=options.timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        stopping.cancel()
        if not reading.done():
            reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
    timed_out = not stop.is_set() and options.timeout_s is not None and not _finished(reading)
    if timed_out and not progress.connected:
        servers = ",".join(settings.bootstrap_servers)
        raise ConnectionError(f"broker {servers} not reached within {options.timeout_s:g} s")
    if timed_out and options.max_records is not None:
        print(
            f"tail: {progress.printed} of {options.max_records} records within "
            f"{options.timeout_s:g} s",
            file=note,
            flush=True,
        )
        return 1
    return 0


def _finished(task: asyncio.Future[None]) -> bool:
    """Whether the reading task ended by itself (its records all printed), not cancelled."""
    return task.done() and not task.cancelled()
