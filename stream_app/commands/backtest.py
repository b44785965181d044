"""`stream-app backtest`: history through the drop detectors, every page they would raise."""

from __future__ import annotations

import argparse
import sys

from stream_app import exit_codes
from stream_app.cli.history import HistoryCommand, say_skipped


class BacktestCommand(HistoryCommand):
    """Prints the backtest report (`stream_app.backtest`), as text or as JSON."""

    name = "backtest"
    description = (
        "Replay run-completed events (one JSON object a line; '-' reads stdin), or the "
        "finished runs of ProjectScylla experiment directories, through the worker's core "
        "and drop detectors with the settings in force, and print every page the worker "
        "would have raised, then why each tier did or did not page. Try a setting (e.g. "
        "EVALSTREAM_DROP_FALSE_PAGE_RUNS, --config FILE) on history before it pages anyone."
    )
    flag = ("--json", "print one JSON document (schemas/json/backtest-report)")

    def run(self, args: argparse.Namespace) -> int:
        """Print the report; say on stderr what the replay left out."""
        from stream_app.backtest import SubtestStreaks, backtest_report, render

        streaks = SubtestStreaks()
        replay, skipped, directories = self.read(args, streaks.see)
        report = backtest_report(replay, skipped, streaks.notes())
        if args.json:
            sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        else:
            sys.stdout.write(render(report, "run" if directories else "line"))
        sys.stdout.flush()
        say_skipped(self.name, report.rejected, report.skipped_runs)
        return exit_codes.OK


COMMAND = BacktestCommand()
