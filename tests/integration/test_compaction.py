"""Compaction on Apache Kafka: the changelogs and the latest-value outputs are compacted topics;
with the log cleaner made quick (segments rolled every second, any dirty share cleaned), a retired
experiment's tombstones really remove its keys, and a worker that recovers from the compacted
changelogs carries on to exactly what `replay` says."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from stream_app.brokers.kafka import ApacheKafka
from stream_app.service.kafka_client import client_kwargs
from stream_app.service.settings import Settings
from tests.helpers import SAMPLE_FILE, encode, make_event
from tests.integration.harness import (
    Worker,
    outputs_equal_replay,
    produce_lines,
    records,
    require_broker,
    settings_for,
    wait_until,
)

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()
QUICK_CLEANER = {
    "log.roll.ms": "1000",
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.min.cleanable.ratio": "0.01",
    "log.cleaner.delete.retention.ms": "1000",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.segment.delete.delay.ms": "100",
}
QUICK_CHANGELOGS = {  # the changelogs' own, apart from the broker's quick cleaner above
    "segment.ms": "900",
    "min.cleanable.dirty.ratio": "0.02",
    "max.compaction.lag.ms": "5000",
}
CHANGELOG_SUFFIX = "-tier-windows-changelog"


def runs(experiment: str, count: int, start: int = 0, minute: int = 0) -> list[bytes]:
    return [
        encode(
            make_event(
                run_id=f"{experiment}/T1/run_{i:03d}",
                experiment_id=experiment,
                tier="T1",
                passed=i % 4 != 0,
                completed_at=f"2026-01-06T{minute // 60:02d}:{minute % 60:02d}:{i % 60:02d}Z",
            )
        )
        for i in range(start, start + count)
    ]


async def topic_configs(settings: Settings, topics: list[str], name: str) -> dict[str, str]:
    """Each topic's value of the topic config `name`, as the broker describes it."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(**client_kwargs(settings))
    await admin.start()
    try:
        answers = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t, {name: None}) for t in topics]
        )
        return {
            resource[3]: {c[0]: c[1] for c in resource[4]}[name]
            for answer in answers
            for resource in answer.resources
        }
    finally:
        await admin.close()


def compacted(settings: Settings, topic: str) -> bool:
    """Whether the cleaner has removed records from `topic`: fewer are left than were written
    (a partition's last record stays in its active segment, so its offset tells how many)."""
    kept = records(settings, topic)
    last: dict[int, int] = {}
    for r in kept:
        last[r.partition] = max(last.get(r.partition, -1), r.offset)
    return len(kept) < sum(offset + 1 for offset in last.values())


def keys_of(settings: Settings, topic: str) -> list[bytes]:
    """Every record's key, tombstones included, in the topic as it is now."""
    return [r.key for r in records(settings, topic)]


def test_compacted_topics_drop_retired_keys_and_recovery_equals_replay(
    workers: list[Worker], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_broker("kafka")
    # For the settings loaded here and every worker started: the changelogs' segments roll and
    # clean within seconds, as `changelog_configs` asks.
    monkeypatch.setenv("EVALSTREAM_CHANGELOG_CONFIGS", json.dumps(QUICK_CHANGELOGS))
    with ApacheKafka(log_file=tmp_path / "broker.log", config=QUICK_CLEANER) as broker:
        settings = settings_for(broker)
        changelog = settings.app_id + CHANGELOG_SUFFIX
        # An experiment that retires: a worker whose idle TTL is 3 s writes its tombstones.
        first = Worker(
            broker,
            tmp_path,
            "first",
            EVALSTREAM_EXPERIMENT_IDLE_TTL_S="3",
            EVALSTREAM_RETIRE_CHECK_S="0.5",
        )
        workers.append(first.start().wait_ready())
        old = runs("old", 12)
        produce_lines(settings, old)
        retired = b"old/T1"
        wait_until(lambda: retired in keys_of(settings, settings.topics.aggregates), 60, what="old")
        wait_until(
            lambda: first.metrics().get(("evalstream_experiments_retired_total", ()), 0) >= 1,
            60,
            what="the old experiment retired",
        )
        first.stop()

        topics = [changelog, settings.topics.aggregates, settings.topics.cross_tier]
        policies = asyncio.run(
            topic_configs(settings, [*topics, settings.topics.input], "cleanup.policy")
        )
        assert policies == {
            changelog: "compact",
            settings.topics.aggregates: "compact",
            settings.topics.cross_tier: "compact",
            settings.topics.input: "delete",
        }
        # The changelogs roll and clean their segments as `changelog_configs` says; the output
        # topics keep the broker's defaults (this broker's quick cleaner).
        assert settings.changelog_configs == QUICK_CHANGELOGS
        for name, value in settings.changelog_configs.items():
            configured = asyncio.run(topic_configs(settings, topics, name))
            assert configured[changelog] == value, name
            assert configured[settings.topics.aggregates] != value, name

        # A worker that never retires: the sample, then a pulse of new runs every second, which
        # rolls segments and gives the cleaner work until the retired keys are gone entirely.
        second = Worker(broker, tmp_path, "second")
        workers.append(second.start().wait_ready())
        produce_lines(settings, SAMPLE)
        sent = [*old, *SAMPLE]
        pulses = 0

        def cleaned() -> bool:
            nonlocal pulses
            # Sixteen experiments, so that every partition gets new records: a partition whose
            # active segment never rolls is never cleaned again, and keeps its tombstones.
            pulse = runs(f"pulse-{pulses % 16}", 2, start=pulses, minute=pulses)
            produce_lines(settings, pulse)
            sent.extend(pulse)
            pulses += 1
            return all(
                retired not in keys_of(settings, topic) and compacted(settings, topic)
                for topic in (changelog, settings.topics.aggregates)
            )

        wait_until(cleaned, 120, interval=1, what="the cleaner to drop the retired keys")
        expected = [line for line in sent if b'"experiment_id": "old"' not in line]
        wait_until(lambda: outputs_equal_replay(settings, expected), 60, what="outputs, before")
        second.stop()

        # A worker with no local state recovers from the compacted changelogs, and the runs it
        # reads next land on the recovered windows: the outputs equal replay of every run.
        third = Worker(broker, tmp_path, "third")
        workers.append(third.start().wait_ready())
        more = list(SAMPLE[:40])  # redelivered: duplicates and late, no change
        later = runs("pulse-0", 5, start=500, minute=600)
        produce_lines(settings, [*more, *later])
        expected += [*more, *later]
        wait_until(lambda: outputs_equal_replay(settings, expected), 60, what="outputs, recovered")
        third.assert_alive()
        third.stop()  # before its broker goes
