"""`stream-app tail TOPIC`: print the records of an output topic as they arrive, one readable line
each (or a JSON line with `--json`, see `terminal.records`), to see what the worker publishes
without a Kafka console.

It reads with a consumer that belongs to no group and commits nothing, so it never disturbs the
worker's group or any other consumer. By default it starts at the end of every partition (new
records only); `--from-beginning` reads what the topic holds first. `--max` and `--timeout` let
scripts and tests end it; Ctrl-C ends it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from dataclasses import dataclass
from typing import Final, TextIO

from stream_app import exit_codes
from stream_app.cli import runner
from stream_app.cli.command import Command
from stream_app.cli.options import (
    add_broker,
    add_config,
    options_of,
    positive_float,
    positive_int,
    settings_of,
)
from stream_app.errors import UserError
from stream_app.service.settings import Settings
from stream_app.terminal.records import SHORT_NAMES, Kind, format_record, json_line, output_kinds

BROKER_TRIES: Final = 5
TOPIC_POLL_S: Final = 0.5


class TailError(UserError):
    """A topic name tail does not know, or a topic it cannot read; one line for the user."""


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
    """The topic a short name (`aggregates`, `grades`, `reports`, `dlq`, `suites`) or a configured
    output topic name stands for.

    Raises:
        TailError: the name is neither.
    """
    full = output_kinds(settings)
    kind = SHORT_NAMES.get(name) or full.get(name)
    if kind is None:
        known = ", ".join([*SHORT_NAMES, *full])
        raise TailError(f"unknown topic {name!r}: give one of {known}")
    return TailTopic(getattr(settings.topics, kind), kind)


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
    from aiokafka import TopicPartition

    from stream_app.service.kafka_client import DENIED, denied, groupless_consumer, wait_for_broker

    await wait_for_broker(settings, max_attempts=BROKER_TRIES)
    partitions, created_later = await _wait_for_topic(settings, target.topic, progress, note)
    async with groupless_consumer(settings, auto_offset_reset="earliest") as consumer:
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
    from aiokafka.errors import TopicAuthorizationFailedError

    from stream_app.service.kafka_client import (
        client_kwargs,
        denied,
        topic_denied,
        topic_partitions,
    )

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
        BrokerUnreachable: the broker was not reached (in five tries, or within the timeout).
    """
    from stream_app.service.kafka_client import BrokerUnreachable

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
        raise BrokerUnreachable(f"broker {servers} not reached within {options.timeout_s:g} s")
    if timed_out and options.max_records is not None:
        print(
            f"tail: {progress.printed} of {options.max_records} records within "
            f"{options.timeout_s:g} s",
            file=note,
            flush=True,
        )
        return exit_codes.INCOMPLETE
    return exit_codes.OK


def _finished(task: asyncio.Future[None]) -> bool:
    """Whether the reading task ended by itself (its records all printed), not cancelled."""
    return task.done() and not task.cancelled()


class TailCommand(Command):
    """Runs `tail` until `--max`, `--timeout` or Ctrl-C; a topic name it does not know is said
    before any broker is tried."""

    name = "tail"
    description = (
        "Print each record of an output topic on one readable line, or as a JSON line with "
        "--json. TOPIC is aggregates, grades, reports, dlq or suites, or a topic's full name. "
        "New records only unless --from-beginning. Reads without a consumer group: it "
        "commits nothing and never disturbs the workers."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """TOPIC, where to start, when to end, how to print; `--broker` and `--config`."""
        parser.add_argument(
            "name", metavar="TOPIC", help="aggregates, grades, reports, dlq, suites, or a name"
        )
        parser.add_argument(
            "--from-beginning",
            action="store_true",
            help="print what the topic holds first (default: only records that arrive from now)",
        )
        parser.add_argument(
            "--max",
            dest="max_records",
            type=positive_int,
            metavar="N",
            help="exit after N records (exit status 0)",
        )
        parser.add_argument(
            "--timeout",
            dest="timeout_s",
            type=positive_float,
            metavar="S",
            help="exit after S seconds (exit status 1 if --max records had not come by then)",
        )
        parser.add_argument(
            "--json",
            dest="as_json",
            action="store_true",
            help="one JSON object a line: topic, partition, offset, timestamp, key, value",
        )
        add_broker(parser)
        add_config(parser)

    def run(self, args: argparse.Namespace) -> int:
        """Print the records; the exit status of `tail`."""
        settings = settings_of(args)
        tail_options = options_of(TailOptions, args)
        resolve_topic(settings, tail_options.name)  # a typo is said before any broker is tried
        runner.configure_logging(self.name)
        return runner.run(lambda stop: tail(settings, tail_options, stop))


COMMAND = TailCommand()
