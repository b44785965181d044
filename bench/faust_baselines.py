"""The two Faust baselines of the benchmark, each a worker process on the benchmark topic:

- `bare`: an agent that does nothing per event: Faust's own ceiling on this path;
- `naive`: per event, validate, append to the tier's list in a table, recompute the statistics:
  the straightforward table pattern that evalstream's design is measured against.

Each writes {"events", "seconds"} (first to last event) to --report once it has seen --events.
Faust's data directory is --data-dir: `bench/run.py` puts it in the run's work directory, which it
removes when the run ends, so that no run leaves a directory behind.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import faust
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from schemas.run_completed import RunCompleted
from stream_app.service.kafka_client import topic_partitions

if TYPE_CHECKING:
    from bench.peer_report import PeerReport
else:  # run as a script: its own folder is on the import path
    from peer_report import PeerReport


async def create_topic(broker_url: str, name: str, partitions: int) -> None:
    """Create `name` and wait until the broker lists all its partitions, before Faust starts.
    Faust would create it at start-up too, but on Apache Kafka the group's first assignment can
    come before its metadata lists the new topic: the assignor then leaves it out ("Ignoring
    missing topic") and the agent waits for a later rebalance. The evalstream worker creates
    its topics before Faust starts for the same reason."""
    admin = AIOKafkaAdminClient(bootstrap_servers=broker_url.removeprefix("kafka://"))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
        while len(await topic_partitions(admin, name)) < partitions:
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["bare", "naive"])
    parser.add_argument("--broker", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--web-port", type=int, required=True)
    parser.add_argument("--data-dir", type=Path, required=True, help="Faust's datadir")
    args = parser.parse_args()

    app = faust.App(
        f"bench-{args.kind}-{os.getpid()}",
        env={},
        broker=args.broker,
        store="memory://",
        autodiscover=False,
        topic_partitions=args.partitions,
        table_standby_replicas=0,
        broker_session_timeout=10,
        web_port=args.web_port,
        web_bind="127.0.0.1",
        datadir=str(args.data_dir),
    )
    topic = app.topic(
        args.topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=args.partitions,
    )
    windows = app.Table("naive-windows", default=list, partitions=args.partitions)
    seen = PeerReport(args.events, args.report).seen

    if args.kind == "bare":

        @app.agent(topic)
        async def bare(stream: faust.StreamT[bytes]) -> None:
            async for _ in stream:
                seen()

    else:
        # Re-keyed by tier so that the table is co-partitioned (as any correct version must be).
        by_tier_name = f"{args.topic}-naive-by-tier-{os.getpid()}"  # each run its own
        # a loop of its own: asyncio.run would unset the current loop, which Faust then wants
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(create_topic(args.broker, by_tier_name, args.partitions))
        finally:
            loop.close()
        by_tier = app.topic(
            by_tier_name,
            key_type=str,
            value_type=bytes,
            value_serializer="raw",
            partitions=args.partitions,
        )

        @app.agent(topic)
        async def validate(stream: faust.StreamT[bytes]) -> None:
            async for raw in stream:
                run = RunCompleted.model_validate_json(raw)
                await by_tier.send(key=f"{run.experiment_id}/{run.tier}", value=raw)

        @app.agent(by_tier)
        async def naive(stream: faust.StreamT[bytes]) -> None:
            async for key, raw in stream.items():
                run = RunCompleted.model_validate_json(raw)
                score = (float(run.passed) + run.judgment.summary.weighted_score) / 2
                runs = [*windows[key], [run.completed_at.isoformat(), score]][-10:]
                windows[key] = runs
                scores = [s for _, s in runs]
                _ = (
                    statistics.median(scores),
                    statistics.fmean(scores),
                    statistics.pstdev(scores),
                    min(scores),
                    max(scores),
                )
                seen()

    sys.argv = [sys.argv[0], "worker", "-l", "warn"]
    app.main()


if __name__ == "__main__":
    main()
