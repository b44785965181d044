"""`replay`'s pace on suites of very different sizes, measured in one run: a run's work on its
suite must not grow with the suite's tasks (issue 43's target: the pace on three suites of 2,500
tasks at least half the pace on three suites of 25).

    .venv/bin/python -m bench.suite_pace [--tasks 25,250,2500] [--rounds 3] [--profile]

Each suite is one agent's tasks, in a harness's order: task after task, each task's T0 and T1
runs interleaved, each tier with its own count of 3 to 40 runs, the task's rates spread from near
0 to near 1. Seeds are fixed."""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stream_app.core.replay import replay_lines  # noqa: E402
from stream_app.service.settings import load_settings  # noqa: E402

SUITES = 3
START = datetime(2026, 6, 1, tzinfo=UTC)


def suite_lines(tasks: int, seed: int = 43) -> Iterator[bytes]:
    """The runs of SUITES suites of `tasks` tasks each, suite after suite, a run a second."""
    rnd = random.Random(seed)
    at = START
    for suite in range(SUITES):
        for task in range(tasks):
            rate = rnd.uniform(0.02, 0.98)
            rates = {"T0": rate, "T1": min(0.99, max(0.01, rate + rnd.uniform(-0.1, 0.2)))}
            marks = [tier for tier in rates for _ in range(rnd.randint(3, 40))]
            rnd.shuffle(marks)
            for n, tier in enumerate(marks):
                at += timedelta(seconds=1)
                experiment = f"suite{suite}-task{task:05d}"
                event = {
                    "schema_version": 1,
                    "run_id": f"{experiment}/{tier}/{n}",
                    "experiment_id": experiment,
                    "suite": f"agent-{suite}",
                    "tier": tier,
                    "model": "claude-sonnet-4-5",
                    "subtest": "00",
                    "run_number": n + 1,
                    "passed": rnd.random() < rates[tier],
                    "judgment": {"summary": {"weighted_score": round(rnd.random(), 4)}},
                    "tokens": {"input": 100, "output": 500, "cache_creation": 0, "cache_read": 0},
                    "started_at": (at - timedelta(seconds=60)).isoformat(),
                    "completed_at": at.isoformat(),
                }
                yield json.dumps(event, separators=(",", ":")).encode()


def pace(tasks: int, profile: bool) -> tuple[int, float]:
    """(runs, seconds) of `replay` over the suites of `tasks` tasks."""
    lines = list(suite_lines(tasks))
    settings = load_settings(broker_url="127.0.0.1:1")
    profiler = cProfile.Profile() if profile else None
    began = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    replay_lines(lines, settings)
    if profiler is not None:
        profiler.disable()
    seconds = time.perf_counter() - began
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return len(lines), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", default="25,250,2500", help="tasks per suite, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the sizes interleaved")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions")
    args = parser.parse_args()
    sizes = [int(t) for t in args.tasks.split(",")]
    paces: dict[int, list[float]] = {tasks: [] for tasks in sizes}
    runs: dict[int, int] = {}
    for _ in range(args.rounds):  # a slow minute of the machine hits every size alike
        for tasks in sizes:
            runs[tasks], seconds = pace(tasks, args.profile)
            paces[tasks].append(runs[tasks] / seconds)
    base = paces[sizes[0]]
    print(f"{args.rounds} rounds; the ratio is to {sizes[0]} tasks' pace in the same round")
    print("| tasks a suite | runs | runs/s (median) | ratio: min | median | max |")
    print("|---:|---:|---:|---:|---:|---:|")
    for tasks in sizes:
        ratios = sorted(p / b for p, b in zip(paces[tasks], base, strict=True))
        print(
            f"| {tasks:,} | {runs[tasks]:,} | {statistics.median(paces[tasks]):,.0f} "
            f"| {ratios[0]:.2f} | {statistics.median(ratios):.2f} | {ratios[-1]:.2f} |"
        )


if __name__ == "__main__":
    main()
