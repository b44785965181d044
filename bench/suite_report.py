"""What one run costs a suite's report: its tiers reported after each of a suite's last runs,
with their comparisons kept up to date (the suite hop's and `replay`'s way) and, in the same
run, remade from every share (the peer: what every report did before). Issue 43: a suite tier's comparison is
updated, not remade, when one stratum moves.

    .venv/bin/python -m bench.suite_report [--tasks 25,250,2500] [--last 40]

One suite of `bench.suite_pace`'s shape (3 to 40 runs of T0 and T1 a task, harness order), fed
to `replay` but for its last runs; then each of those runs, and after it both reports, timed
(the remade one after the tiers' comparisons are dropped; the detectors are kept in both)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import suite_pace  # noqa: E402
from stream_app.core.replay import Replay  # noqa: E402
from stream_app.core.suite.report import suite_tiers  # noqa: E402
from stream_app.service.settings import load_settings  # noqa: E402


def report_ms(tasks: int, last: int) -> tuple[list[float], list[float]]:
    """The report's milliseconds after each of the last `last` runs: kept, and remade."""
    suite_pace.SUITES = 1
    lines = list(suite_pace.suite_lines(tasks))
    settings = load_settings(broker_url="127.0.0.1:1")
    replay = Replay(settings)
    for number, line in enumerate(lines[:-last], start=1):
        replay.feed(line, number)
    kept_ms, remade_ms = list[float](), list[float]()
    for number, line in enumerate(lines[-last:], start=len(lines) - last + 1):
        replay.feed(line, number)
        replay.flush()
        states = {tier: state for (_, tier), state in replay.suites.items()}
        for out in (kept_ms, remade_ms):
            if out is remade_ms:  # this report makes them from every share
                for state in states.values():
                    state.comparison = None
            began = time.perf_counter()
            list(suite_tiers("agent-0", states, settings.drop_design, "T0", 0.95))
            out.append((time.perf_counter() - began) * 1000)
    return kept_ms[1:], remade_ms[1:]  # the first kept report makes the comparisons


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", default="25,250,2500", help="tasks per suite, comma-separated")
    parser.add_argument("--last", type=int, default=40, help="runs timed at the end")
    args = parser.parse_args()
    print("| tasks | report kept up to date, ms: min | median | max | remade, ms (median) |")
    print("|---:|---:|---:|---:|---:|")
    for tasks in (int(t) for t in args.tasks.split(",")):
        kept, made = report_ms(tasks, args.last)
        print(
            f"| {tasks:,} | {min(kept):.1f} | {statistics.median(kept):.1f} | {max(kept):.1f} "
            f"| {statistics.median(made):.1f} |"
        )


if __name__ == "__main__":
    main()
