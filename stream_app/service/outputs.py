"""Everything the stages publish, and the one way they publish it: a `Send` callable (the
producer in the worker, a list in the unit tests) and the Prometheus exporter."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, cast

from schemas.aggregates import TierAggregate
from schemas.cross_tier import CrossTierReport
from schemas.dead_letter import MessageOrigin, cap_key
from schemas.grade_change import GradeChange
from schemas.run_bundle import BUNDLE_MAX_BYTES, bundle_runs
from schemas.suites import SuiteTier
from stream_app.core.ingest import Rejection, error_text, make_dead_letter
from stream_app.core.keys import suite_key, tier_key
from stream_app.core.suite.message import SuiteRun, bundles, retirements
from stream_app.service.exporter import Exporter
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import MESSAGE_OVERHEAD_BYTES, Settings

log = logging.getLogger(__name__)

Send = Callable[[str, bytes | None, bytes | None, int | None], Awaitable[Awaitable[Any]]]
"""Hand a record (topic, key, value, partition) to the producer; the awaitable it returns
resolves when the broker acknowledged it. A None value is a tombstone."""


class Record(NamedTuple):
    """One message a stage takes: where it came from, its key and its bytes."""

    topic: str
    partition: int
    offset: int | None
    """None: a message this worker published itself, handed on in-process (`Hop.inner`)."""
    key: bytes | None
    value: bytes


def key_text(raw: bytes | None) -> str | None:
    """A key as text for a dead letter's origin: None unless UTF-8, cut to the key cap."""
    if raw is None:
        return None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return cast(bytes, cap_key(raw)).decode("utf-8", "ignore")


class Outputs:
    """The worker's output topics, the dead-letter topic and the gauges that mirror them."""

    def __init__(self, send: Send, settings: Settings, exporter: Exporter) -> None:
        self._send = send
        self.settings = settings
        self.topics = settings.topics
        self.exporter = exporter
        self.unconfirmed: list[Awaitable[Any]] = []
        """Acknowledgements of this batch's sends, not yet awaited (see `confirm`)."""
        self.state_writers: list[Callable[[], Awaitable[None]]] = []
        """What writes the stage's held states once its outputs are acknowledged (its table's
        `ChangelogTable.write`)."""

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None
    ) -> Awaitable[Any]:
        """Send a record; its acknowledgement is kept for `confirm`."""
        ack = await self._send(topic, key, value, partition)
        self.unconfirmed.append(ack)
        return ack

    async def confirm(self, *, states: bool = True) -> None:
        """Wait until the broker acknowledged every record sent since the last call; raise if it
        refused one. Then (unless `states` is False) write the states held: every output is
        acknowledged before the state that records it is written, so a crash in between
        redelivers the batch and sends the outputs again, and no recovery re-publishes. The
        batch runner calls it before a batch counts as done: Faust's own flush before a commit
        waits for the records but does not fail on a refused one."""
        acks, self.unconfirmed = self.unconfirmed, []
        for ack in acks:
            await ack
        if states:
            for write in self.state_writers:
                await write()

    async def forward_runs(self, partition: int, runs: list[bytes]) -> None:
        """Accepted runs' metrics (`RunMetrics` JSON) for one partition of the re-keyed topic,
        in as few bundles as fit the broker's message limit."""
        limit = min(
            BUNDLE_MAX_BYTES, self.settings.broker_max_message_bytes - MESSAGE_OVERHEAD_BYTES
        )
        key = f"partition-{partition}".encode()
        for bundle in bundle_runs(runs, limit):
            await self.send(self.topics.runs_by_tier, key, bundle, partition)

    async def grade_change(self, change: GradeChange) -> Awaitable[Any]:
        """Send a grade change; the caller awaits the result before writing the state."""
        key = tier_key(change.experiment_id, change.tier).encode()
        ack = await self.send(
            self.topics.grade_changes, key, change.model_dump_json().encode(), None
        )
        self.exporter.grade_changes.labels(
            change.experiment_id, change.tier, change.direction
        ).inc()
        return ack

    async def suite_feed(self, suite: str, tier: str, runs: list[SuiteRun]) -> list[Awaitable[Any]]:
        """Runs' suite evidence, bundled, on their suite's partition; the caller awaits the
        results before it writes the states that accepted them (the suite hop cannot re-read
        them)."""
        key = suite_key(suite, tier).encode()
        partition = partition_for(suite, self.settings.partitions)
        limit = self.settings.broker_max_message_bytes - MESSAGE_OVERHEAD_BYTES
        return [
            await self.send(self.topics.suite_feed, key, bundle, partition)
            for bundle in bundles(suite, tier, runs, limit)
        ]

    async def retire_from_suite(self, suite: str, tier: str, experiments: list[str]) -> None:
        """Retired experiments' shares of a suite tier go (on the suite's partition, after their
        runs; in as many messages as the broker's limit needs)."""
        key = suite_key(suite, tier).encode()
        partition = partition_for(suite, self.settings.partitions)
        limit = self.settings.broker_max_message_bytes - MESSAGE_OVERHEAD_BYTES
        for value in retirements(suite, tier, experiments, limit):
            await self.send(self.topics.suite_feed, key, value, partition)

    async def suite_tier(self, report: SuiteTier) -> None:
        """A suite's tier, on its suite's partition, and its gauges."""
        key = suite_key(report.suite, report.tier).encode()
        partition = partition_for(report.suite, self.settings.partitions)
        value = report.model_dump_json().encode()
        await self.send(self.topics.suite_tiers, key, value, partition)
        self.exporter.set_suite(report, value)

    async def retire_suite_tier(self, suite: str, tier: str) -> None:
        """A quarantined suite tier: a tombstone for its key, and its gauges go."""
        key = suite_key(suite, tier).encode()
        await self.send(
            self.topics.suite_tiers, key, None, partition_for(suite, self.settings.partitions)
        )
        self.exporter.remove_suite(suite, tier)

    async def aggregate(self, agg: TierAggregate, value: bytes | None = None) -> None:
        """A tier's aggregate (`value`: its JSON, when made already), on the partition of its
        experiment (a consumer of one partition sees all of an experiment's tiers), and its
        gauges."""
        key = tier_key(agg.experiment_id, agg.tier).encode()
        partition = partition_for(agg.experiment_id, self.settings.partitions)
        value = agg.model_dump_json().encode() if value is None else value
        await self.send(self.topics.aggregates, key, value, partition)
        self.exporter.set_tier(agg)

    async def retire_tier(self, experiment_id: str, tier: str) -> None:
        """A retired tier: a tombstone for its key on the aggregates topic (a compacted consumer
        drops it)."""
        key = tier_key(experiment_id, tier).encode()
        partition = partition_for(experiment_id, self.settings.partitions)
        await self.send(self.topics.aggregates, key, None, partition)

    async def retire_experiment(self, experiment_id: str) -> None:
        """A retired experiment: a tombstone for its cross-tier report, and its gauges go."""
        await self.send(self.topics.cross_tier, experiment_id.encode(), None, None)
        self.exporter.remove_experiment(experiment_id)

    async def report(self, report: CrossTierReport) -> None:
        """An experiment's cross-tier report, and its gauges."""
        key = report.experiment_id.encode()
        value = report.model_dump_json().encode()
        await self.send(self.topics.cross_tier, key, value, None)
        self.exporter.set_experiment(report)

    async def dead_letter(
        self,
        raw: bytes,
        rejection: Rejection,
        topic: str,
        *,
        partition: int | None = None,
        offset: int | None = None,
        key: bytes | None = None,
    ) -> None:
        """Dead-letter the bytes a stage received (or a stored state), and count it."""
        origin = MessageOrigin(topic=topic, partition=partition, offset=offset, key=key_text(key))
        cap = self.settings.dead_letter_cap
        try:
            value = make_dead_letter(raw, rejection, origin, payload_cap=cap).model_dump_json()
        except Exception as exc:  # a detail that does not serialize must not cost the letter
            plain = Rejection(rejection.reason, {"unserializable_detail": error_text(exc)})
            value = make_dead_letter(raw, plain, origin, payload_cap=cap).model_dump_json()
        await self.send(self.topics.dead_letter, cap_key(key), value.encode(), None)
        self.exporter.rejected.labels(reason=rejection.reason).inc()
        if rejection.reason in ("processing_error", "state_error"):
            log.warning(
                "dead-lettered %s from %s[%s]@%s: %s",
                rejection.reason,
                topic,
                partition,
                offset,
                rejection.detail,
            )

    async def reject(self, record: Record, rejection: Rejection) -> None:
        """Dead-letter one message a stage took."""
        await self.dead_letter(
            record.value,
            rejection,
            record.topic,
            partition=record.partition,
            offset=record.offset,
            key=record.key,
        )
