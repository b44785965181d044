"""The topology is declared once and both composers follow it: the worker's Faust app and the
in-memory chain read the same topics with the same stages, and every topic is declared."""

from __future__ import annotations

from typing import Any

from faust.types import TP

from stream_app.service.app import UnassignedChangelog, Worker, create_app, partitions_of
from stream_app.service.batches import Batching
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
        SETTINGS.topics.suite_tiers,
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


def test_the_hops_on_the_latency_path_count_their_batches_and_the_suite_hop_waits() -> None:
    """The validation and windows hops' batches are the latency path's; the suite hop's turns
    wait for its gaps (`latency_path.py`)."""
    worker = Worker(SETTINGS)
    paths = {}
    for agent in worker.app.agents.values():
        cells = [cell.cell_contents for cell in agent.fun.__closure__ or ()]
        batching = next(c for c in cells if isinstance(c, Batching))
        paths[agent.name.rsplit(".", 1)[-1]] = batching.path
    on_path = {hop.stage.name for hop in HOPS if hop.on_latency_path}
    assert on_path == {"validate", "window"}
    assert paths == {
        hop.stage.name: worker.latency_path if hop.stage.name in on_path else None for hop in HOPS
    }
    assert worker.stages.suites.turns == worker.latency_path.turns


def test_the_chain_reads_what_the_topology_says() -> None:
    chain = Chain(SETTINGS)
    wired = [(topic, type(stage).name) for topic, stage in chain._sources()]
    assert wired == [(getattr(SETTINGS.topics, hop.source), hop.stage.name) for hop in HOPS]


def test_a_source_partition_assigned_without_its_changelog_stops_the_worker() -> None:
    """Faust's assignor leaves out a changelog missing from the leader's metadata: the recovery
    hook must see it, not start the partition's table empty (app.Worker.on_recovered)."""
    source, changelog = SETTINGS.topics.runs_by_tier, "topo-tier-windows-changelog"
    assigned = {TP(source, 0), TP(source, 2), TP(changelog, 0), TP("other", 2)}
    assert partitions_of(assigned, source) == {0, 2}
    assert partitions_of(assigned, source) - partitions_of(assigned, changelog) == {2}
    assert "partitions [2] of topo-tier-windows-changelog" in str(
        UnassignedChangelog(changelog, {2})
    )
