"""The two Faust baselines of the benchmark, each a worker process on the benchmark topic:

- `bare`: an agent that does nothing per event: Faust's own ceiling on this path;
- `naive`: per event, validate, append to the tier's list in a table, recompute the statistics:
  the straightforward table pattern that evalstream's design is measured against.

Each writes {"events", "seconds"} (first to last event) to --report once it has seen --events.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import faust
from peer_report import PeerReport

from schemas.run_completed import RunCompleted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["bare", "naive"])
    parser.add_argument("--broker", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--web-port", type=int, required=True)
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
        datadir=f"/tmp/bench-{args.kind}-{os.getpid()}",
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
        async def bare(stream: faust.Stream[bytes]) -> None:
            async for _ in stream:
                seen()

    else:
        # Re-keyed by tier so that the table is co-partitioned (as any correct version must be).
        by_tier = app.topic(
            f"{args.topic}-naive-by-tier-{os.getpid()}",  # each run its own
            key_type=str,
            value_type=bytes,
            value_serializer="raw",
            partitions=args.partitions,
        )

        @app.agent(topic)
        async def validate(stream: faust.Stream[bytes]) -> None:
            async for raw in stream:
                run = RunCompleted.model_validate_json(raw)
                await by_tier.send(key=f"{run.experiment_id}/{run.tier}", value=raw)

        @app.agent(by_tier)
        async def naive(stream: faust.Stream[bytes]) -> None:
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
