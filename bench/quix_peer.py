"""The Quix Streams peer of the benchmark: the job a user might write with Quix instead.

Runs in its own virtualenv (`bench/.venv-quix`, made by `bench/run.py`: quixstreams pins
pydantic < 2.14). Per run: evalstream's `evaluate_run`, then `group_by` experiment/tier (Quix
re-partitions through a topic of its own), then a stateful step that keeps the tier's last 10
runs in Quix's state (RocksDB with a changelog) with evalstream's `TierState.apply` and publishes
the aggregate; the same core calls the evalstream worker makes, with Quix's plumbing around them.

Writes {"events", "seconds"} (first to last run through the stateful step) to --report once it
has seen --events runs, then stops.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from quixstreams import Application  # type: ignore[import-not-found]  # noqa: E402

from stream_app.core.config import CoreConfig  # noqa: E402
from stream_app.core.ingest import Rejection, evaluate_run  # noqa: E402
from stream_app.core.keys import tier_key  # noqa: E402
from stream_app.core.tier_state import TierState  # noqa: E402
from stream_app.core.window import WindowEntry  # noqa: E402

if TYPE_CHECKING:
    from bench.peer_report import PeerReport
else:  # run as a script: its own folder is on the import path
    from peer_report import PeerReport


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--broker", required=True, help="host:port")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    args = parser.parse_args()
    config = CoreConfig()
    group = f"bench-quix-{os.getpid()}"
    app = Application(
        broker_address=args.broker,
        consumer_group=group,
        auto_offset_reset="earliest",
        state_dir=str(args.state_dir),
        loglevel="WARNING",
    )
    source = app.topic(args.topic, key_deserializer="bytes", value_deserializer="bytes")
    out = app.topic(f"{group}-aggregates", value_serializer="bytes")
    count = PeerReport(args.events, args.report).seen

    def evaluate(raw: bytes) -> dict[str, Any] | None:
        metrics = evaluate_run(raw, config)
        if isinstance(metrics, Rejection):
            return None
        run: dict[str, Any] = json.loads(metrics.model_dump_json())  # as the worker forwards it
        return run

    def window(run: dict[str, Any], state: Any) -> bytes:
        stored = state.get("tier")
        tier = (
            TierState.from_json(
                run["experiment_id"], run["tier"], config.window_size, stored.encode()
            )
            if stored is not None
            else TierState.empty(run["experiment_id"], run["tier"], config.window_size)
        )
        tier.apply(WindowEntry.from_run(run), config)
        state.set("tier", tier.to_json().decode())
        count()
        return tier.aggregate(config).model_dump_json().encode()

    sdf = app.dataframe(source)
    sdf = sdf.apply(evaluate).filter(lambda run: run is not None)
    sdf = sdf.group_by(lambda run: tier_key(run["experiment_id"], run["tier"]), name="tier")
    sdf = sdf.apply(window, stateful=True)
    sdf.to_topic(out)
    app.run()


if __name__ == "__main__":
    main()
