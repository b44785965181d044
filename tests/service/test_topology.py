"""The topology is declared once and both composers follow it: the worker's Faust app and the
in-memory chain read the same topics with the same stages, and every topic is declared."""

from __future__ import annotations

from typing import Any

from stream_app.service.app import create_app
from stream_app.service.settings import TopicNames, load_settings
from stream_app.service.topology import (
    HOPS,
    STATEFUL,
    TOPICS,
    all_topics,
    changelog_topic,
    latest_value_topics,
    source_topics,
)
from tests.chain import Chain

SETTINGS = load_settings(broker_url="127.0.0.1:1", app_id="topo")


def test_every_topic_is_declared_once() -> None:
    assert sorted(t.role for t in TOPICS) == sorted(TopicNames.model_fields)
    assert all_topics(SETTINGS)[0] == SETTINGS.topics.input
    assert latest_value_topics(SETTINGS) == {
        SETTINGS.topics.aggregates,
        SETTINGS.topics.cross_tier,
        SETTINGS.topics.suites,
    }


def test_the_worker_reads_what_the_topology_says() -> None:
    app = create_app(SETTINGS)
    agents: dict[str, Any] = {name.rsplit(".", 1)[-1]: agent for name, agent in app.agents.items()}
    read = {agent.name.rsplit(".", 1)[-1]: set(agent.channel.topics) for agent in agents.values()}
    assert read == {hop.stage.name: {getattr(SETTINGS.topics, hop.source)} for hop in HOPS}
    # Faust names a table's changelog as the topology does (the chain's tables use the name).
    assert {t.changelog_topic.get_topic_name() for t in app.tables.values()} == {
        changelog_topic(SETTINGS, stage) for stage in STATEFUL
    }
    assert set(source_topics(SETTINGS)) == set.union(*read.values()) | {
        changelog_topic(SETTINGS, stage) for stage in STATEFUL
    }


def test_the_chain_reads_what_the_topology_says() -> None:
    chain = Chain(SETTINGS)
    wired = [(topic, type(stage).name) for topic, stage in chain._sources()]
    assert wired == [(getattr(SETTINGS.topics, hop.source), hop.stage.name) for hop in HOPS]
