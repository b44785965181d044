"""The worker on Apache Kafka with suites of 25 and of 2,500 tasks (`bench.suite_pace`'s runs): a
run's work on its suite must not grow with the suite, in the suite hop as in `replay`.

    .venv/bin/python -m bench.suite_hop [--tasks 25,2500]

For each size, one worker of its own reads the runs, produced beforehand, to the end of the suite
feed; the figures are its runs a second (the span from the first input record to the last suite
tier, by the records' own timestamps) and the seconds its suite stage spent per run (the
worker's processing histogram), with their ratio to the smallest size's in the same run."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import (  # noqa: E402
    Broker,
    Worker,
    log,
    stage_seconds,
    start_broker,
    topic_span,
    worker_settings,
)
from bench.suite_pace import suite_lines  # noqa: E402
from stream_app.sources.producer import produce  # noqa: E402


def measure(broker: Broker, workdir: Path, tasks: int) -> dict[str, float]:
    """One worker over the runs of three suites of `tasks` tasks."""
    name = f"suites-{tasks}"
    settings = worker_settings(broker, name, input_topic=f"{name}-input")
    lines = list(suite_lines(tasks))
    asyncio.run(produce(settings, lines, progress=None, create_topics=True))
    log(f"{len(lines):,} runs of {tasks:,} tasks a suite produced; the worker starts")
    worker = Worker(broker, workdir, settings)
    try:
        worker.wait_ready(timeout=120)
        t = settings.topics
        worker.wait_committed([t.input, t.runs_by_tier, t.suite_feed])
        seconds = asyncio.run(topic_span(settings.bootstrap_servers[0], t.input, t.suite_tiers))
        suite = stage_seconds(worker).get("suite", 0.0)
    finally:
        worker.stop(timeout=30)
    runs = len(lines)
    return {"runs": runs, "runs_per_s": runs / seconds, "suite_us": 1e6 * suite / runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", default="25,2500", help="tasks per suite, comma-separated")
    args = parser.parse_args()
    sizes = [int(t) for t in args.tasks.split(",")]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as cleanup:
        workdir = Path(tmp)
        broker = start_broker("kafka", workdir, cleanup)
        figures = {tasks: measure(broker, workdir, tasks) for tasks in sizes}
    base = figures[sizes[0]]
    print("| tasks a suite | runs | runs/s | ratio | suite stage µs a run | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for tasks, f in figures.items():
        print(
            f"| {tasks:,} | {f['runs']:,.0f} | {f['runs_per_s']:,.0f} "
            f"| {f['runs_per_s'] / base['runs_per_s']:.2f} | {f['suite_us']:.0f} "
            f"| {f['suite_us'] / base['suite_us']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
