"""The worker's whole chain in memory: validate → windows → cross-tier and suites, the real
stages over an in-memory broker (a list per topic partition) and tables that are dicts recovered
from their changelogs. It runs the worker's delivery contract (a batch is committed after its
outputs are confirmed; a crash redelivers everything after the last commit) with hooks between
batches: a crash and restart, a rebalance (partitions revoked, then recovered), dropped caches,
retirement. The third way, beside `replay` and a live worker, to check that the worker equals
`replay`."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from stream_app import __version__
from stream_app.core.keys import tier_key
from stream_app.service.changelog_table import ChangelogTable, MemoryStore
from stream_app.service.exporter import Exporter
from stream_app.service.outputs import Outputs, Record
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import Settings
from stream_app.service.stages.cross_tier import CrossTierStage
from stream_app.service.stages.validate import ValidateStage
from stream_app.service.stages.windows import WindowsStage
from stream_app.service.topology import Stages, StatefulStage, build_stages, changelog_topic
from stream_app.sources.producer import experiment_key
from tests.scenarios import dead_letter_reasons

Hook = Callable[["Chain"], Awaitable[None]]


class MemoryBroker:
    """Topics as lists of (key, value) per partition; a send is acknowledged at once."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.logs: dict[str, dict[int, list[tuple[bytes | None, bytes | None]]]] = {}

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None
    ) -> Awaitable[Any]:
        """Append the record (to its key's partition when none is given); acknowledged."""
        if partition is None:
            partition = partition_for(key, self.partitions) if key is not None else 0
        self.logs.setdefault(topic, {}).setdefault(partition, []).append((key, value))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    def read(self, topic: str, partition: int, offset: int, limit: int) -> list[Record]:
        """Up to `limit` records of a partition from `offset`."""
        log = self.logs.get(topic, {}).get(partition, [])
        return [
            Record(topic, partition, at, key, value if value is not None else b"")
            for at, (key, value) in enumerate(log[offset : offset + limit], start=offset)
        ]

    def end(self, topic: str, partition: int) -> int:
        """The partition's end offset."""
        return len(self.logs.get(topic, {}).get(partition, []))

    def latest(self, topic: str) -> dict[bytes, Any]:
        """The last value of every key (a tombstone removes it), decoded: what a compacted
        topic's consumer ends up with."""
        out: dict[bytes, Any] = {}
        for log in self.logs.get(topic, {}).values():
            for key, value in log:
                if key is None:
                    continue
                if value is None:
                    out.pop(key, None)
                else:
                    out[key] = json.loads(value)
        return out

    def values(self, topic: str) -> list[Any]:
        """Every value of the topic, decoded, partition by partition."""
        return [
            json.loads(value)
            for _, log in sorted(self.logs.get(topic, {}).items())
            for _, value in log
            if value is not None
        ]


@dataclass
class Worker:
    """One incarnation of the worker: its stages and tables, from its start to its crash."""

    stages: Stages
    positions: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def validate(self) -> ValidateStage:
        return self.stages.validate

    @property
    def windows(self) -> WindowsStage:
        return self.stages.windows

    @property
    def cross_tier(self) -> CrossTierStage:
        return self.stages.cross_tier


class Chain:
    """The three stages in memory, one worker owning every partition, batches of up to `batch`
    records from one partition at a time, the positions committed every `commit_every` batches
    (a crash reads the rest again, as Faust's periodic commit does)."""

    def __init__(
        self, settings: Settings, batch: int = 7, commit_every: int = 1, seed: int | None = None
    ) -> None:
        self.settings = settings
        self.batch = batch
        self.commit_every = commit_every
        self.rnd = random.Random(seed) if seed is not None else None
        """With a seed, the next source partition is drawn at random instead of in turn: the
        suite hop's input then interleaves the windows hop's partitions in another order."""
        self.broker = MemoryBroker(settings.partitions)
        self.exporter = Exporter(__version__)
        self.committed: dict[tuple[str, int], int] = {}
        self.batches = 0
        self.cursor = 0
        self.worker = self._start()

    def _table(self, stage: StatefulStage, outputs: Outputs) -> ChangelogTable:
        """A stage's table, recovered from its changelog (the last value of every key)."""
        n = self.settings.partitions
        changelog = changelog_topic(self.settings, stage)
        data: dict[bytes, bytes] = {}
        for partition_log in self.broker.logs.get(changelog, {}).values():
            for key, value in partition_log:
                assert key is not None
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value
        return ChangelogTable(
            MemoryStore(data),
            self.broker.send,
            changelog,
            lambda k: stage.key_partition(k, n),
        )

    def _start(self) -> Worker:
        stages = build_stages(self.settings, self.broker.send, self.exporter, self._table)
        return Worker(stages, positions=dict(self.committed))

    async def recover(self, owned: set[int] | None = None) -> None:
        """What the worker does once a table is recovered: each stateful stage restores the
        gauges of the partitions it newly owns (it re-publishes nothing)."""
        owned = set(range(self.settings.partitions)) if owned is None else owned
        for stage in self.worker.stages.stateful:
            newly = await stage.on_recover(owned)
            await stage.restore_gauges(newly, stage.generation)

    async def restart(self) -> None:
        """A crash and a new worker: everything after the last commit is read again, the tables
        come back from their changelogs."""
        self.worker = self._start()
        await self.recover()

    async def rebalance(self, moved: set[int]) -> None:
        """Partitions `moved` go to another worker and come back: revoked (caches dropped),
        recovered without them (their gauges dropped), then revoked and recovered with every
        partition again (their gauges restored), as two rebalances do."""
        every = set(range(self.settings.partitions))
        for owned in (every - moved, every):
            for stage in self.worker.stages.stateful:
                await stage.revoke(every)
            self.worker.validate.drop_cache()
            await self.recover(owned)

    def produce(self, lines: Iterable[bytes]) -> None:
        """Send input lines keyed by their experiment, as `stream-app produce` does."""
        loop_free = self.broker.logs.setdefault(self.settings.topics.input, {})
        for line in lines:
            key = experiment_key(line)
            partition = partition_for(key, self.settings.partitions) if key is not None else 0
            loop_free.setdefault(partition, []).append((key, line))

    def _sources(self) -> list[tuple[str, Any]]:
        return [(topic, stage) for _, topic, stage in self.worker.stages.wired(self.settings)]

    async def step(self) -> bool:
        """One batch from the next source partition with input, round robin over the three
        stages and their partitions (as the worker's agents interleave); False when none has
        any."""
        sources = [
            (topic, stage, partition)
            for topic, stage in self._sources()
            for partition in range(self.settings.partitions)
        ]
        if self.rnd is not None:
            self.cursor = self.rnd.randrange(len(sources))
        for i in range(len(sources)):
            topic, stage, partition = sources[(self.cursor + i) % len(sources)]
            at = self.worker.positions.get((topic, partition), 0)
            if at >= self.broker.end(topic, partition):
                continue
            self.cursor = (self.cursor + i + 1) % len(sources)
            records = self.broker.read(topic, partition, at, self.batch)
            await stage.handle(records)
            await stage.outputs.confirm()
            self.worker.positions[(topic, partition)] = at + len(records)
            self.batches += 1
            if self.batches % self.commit_every == 0:
                self.committed = dict(self.worker.positions)
            return True
        return False

    async def drain(self, hooks: dict[int, Hook] | None = None) -> None:
        """Run batches until no stage has input; `hooks[n]` runs after the n-th batch (counted
        over the chain's life)."""
        hooks = hooks or {}
        while await self.step():
            hook = hooks.get(self.batches)
            if hook is not None:
                await hook(self)

    async def retire(self, now_us: int) -> list[str]:
        """The worker's retirement timer, at `now_us`."""
        retired = await self.worker.windows.retire_idle(now_us)
        await self.worker.windows.outputs.confirm()
        return retired

    def outputs(self) -> tuple[dict[bytes, Any], dict[bytes, Any]]:
        """The latest aggregate of every tier and report of every experiment."""
        t = self.settings.topics
        return self.broker.latest(t.aggregates), self.broker.latest(t.cross_tier)

    def suites(self) -> dict[bytes, Any]:
        """The latest state of every suite's tier."""
        return self.broker.latest(self.settings.topics.suite_tiers)

    def dead_letter_reasons(self) -> list[str]:
        """The reason of every message dead-lettered, sorted, one per message."""
        return dead_letter_reasons(self.broker.values(self.settings.topics.dead_letter))


def tier_keys(aggregates: dict[bytes, Any]) -> set[str]:
    """The tiers an aggregates map holds, as experiment/tier keys."""
    return {tier_key(a["experiment_id"], a["tier"]) for a in aggregates.values()}
