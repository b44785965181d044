"""`stream-app replay`: history through the worker's core, the final state printed as JSON."""

from __future__ import annotations

import argparse
import sys

from stream_app import exit_codes
from stream_app.cli.history import HistoryCommand, say_skipped


class ReplayCommand(HistoryCommand):
    """Replays history with the settings in force; exits 1 under `--strict` when anything was
    left out."""

    name = "replay"
    description = (
        "Replay run-completed events (one JSON object a line; '-' reads stdin), or the "
        "finished runs of ProjectScylla experiment directories, and print the final tier "
        "aggregates, cross-tier reports, rejected lines and ignored counts as JSON."
    )
    flag = ("--strict", "exit 1 when any line (or run directory) was rejected")

    def run(self, args: argparse.Namespace) -> int:
        """Print the replay's report; say on stderr what it left out."""
        replay, skipped, _ = self.read(args)
        report = replay.report().model_copy(update={"skipped_runs": skipped})
        sys.stdout.write(report.model_dump_json(indent=2))
        sys.stdout.write("\n")
        sys.stdout.flush()
        say_skipped(self.name, len(report.rejected), report.skipped_runs)
        problems = report.rejected or report.skipped_runs
        return exit_codes.INCOMPLETE if args.strict and problems else exit_codes.OK


COMMAND = ReplayCommand()
