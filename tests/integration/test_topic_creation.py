"""The worker creates every topic it reads before Faust starts, its tables' changelogs among
them, and waits until the broker lists them: a group's first assignment then holds every
partition. A changelog left for Faust to create as its table starts was often missing from the
consumer's first metadata; Faust's assignor ignored it, aiokafka refreshes that metadata only
every five minutes, and a worker that took over a partition meanwhile started its table empty
(`topology.create_topics`). The changelogs are compacted, with `changelog_configs`."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_app.service.kafka_client import BrokerRefused, client_kwargs
from stream_app.service.settings import Settings
from stream_app.service.topology import changelog_topics, create_topics, source_topics
from tests.integration.harness import PARTITIONS, Broker, settings_for
from tests.integration.test_compaction import topic_configs


async def first_assignment(settings: Settings) -> set[TopicPartition]:
    """What a consumer group's only member is assigned at once after `create_topics`."""
    consumer = AIOKafkaConsumer(
        *source_topics(settings), group_id=f"{settings.app_id}-probe", **client_kwargs(settings)
    )
    await consumer.start()
    try:
        async with asyncio.timeout(60):
            while not consumer.assignment():
                await asyncio.sleep(0.05)
        return set(consumer.assignment())
    finally:
        await consumer.stop()


def test_the_first_assignment_after_start_up_holds_every_changelog(broker: Broker) -> None:
    settings = settings_for(broker)
    created = asyncio.run(create_topics(settings))
    changelogs = changelog_topics(settings)
    assert changelogs <= set(created)
    assigned = asyncio.run(first_assignment(settings))
    assert assigned == {
        TopicPartition(topic, p) for topic in source_topics(settings) for p in range(PARTITIONS)
    }
    policies = asyncio.run(topic_configs(settings, sorted(changelogs), "cleanup.policy"))
    assert policies == dict.fromkeys(changelogs, "compact")
    for name, value in settings.changelog_configs.items():  # the defaults: segments that roll
        assert asyncio.run(topic_configs(settings, sorted(changelogs), name)) == dict.fromkeys(
            changelogs, value
        )
    assert asyncio.run(create_topics(settings)) == []  # a second start creates nothing


def test_a_changelog_config_the_broker_does_not_take_is_one_line_at_once(broker: Broker) -> None:
    """Not waited out as a topic that never appears: the broker's refusal, named."""
    settings = settings_for(broker).model_copy(update={"changelog_configs": {"segment.ms": "soon"}})
    began = time.monotonic()
    with pytest.raises(BrokerRefused, match=r"refused to create .*-changelog") as refused:
        asyncio.run(create_topics(settings))
    assert "InvalidConfigurationError" in str(refused.value)
    assert "changelog_configs" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert time.monotonic() - began < 10  # not the 30 s wait for a topic to be listed
