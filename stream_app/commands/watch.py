"""`stream-app watch DIR...`: publish the finished runs of ProjectScylla experiments, inspect_ai
logs and Harbor jobs, then new ones as they finish (`stream_app.sources.watcher`), until Ctrl-C
or, with `--once`, at once."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from stream_app import exit_codes
from stream_app.cli import options, runner
from stream_app.cli.command import Command


class WatchCommand(Command):
    """Runs a `Watcher`; exits 1 under `--strict` when any run directory was skipped."""

    name = "watch"
    description = (
        "Publish every finished run of the directories (ProjectScylla experiments or results "
        "folders, inspect_ai logs, Harbor jobs) as a run-completed event; keep watching for "
        "new runs until Ctrl-C. A state file keeps a restart from sending runs again."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The directories, how to watch them, `--broker` and `--config`."""
        parser.add_argument(
            "roots",
            nargs="+",
            type=Path,
            metavar="DIR",
            help="ProjectScylla experiment or results, inspect_ai log, or Harbor jobs directories",
        )
        parser.add_argument("--once", action="store_true", help="publish what is there, then exit")
        parser.add_argument(
            "--state",
            dest="state_path",
            type=Path,
            metavar="FILE",
            help="the state file (default: one per broker and topic under "
            "$XDG_STATE_HOME/evalstream)",
        )
        parser.add_argument(
            "--resend",
            action="store_true",
            help="publish every run again (the worker drops dups)",
        )
        parser.add_argument(
            "--poll",
            dest="poll_s",
            type=float,
            metavar="S",
            help="rescan every S seconds instead of file events",
        )
        parser.add_argument(
            "--strict", action="store_true", help="exit 1 when any run directory was skipped"
        )
        options.add_broker(parser)
        options.add_config(parser)

    def run(self, args: argparse.Namespace) -> int:
        """Publish until stopped (or once)."""
        from stream_app.sources import watcher

        watch_options = options.options_of(watcher.WatchOptions, args, roots=tuple(args.roots))
        settings = options.settings_of(args)
        runner.configure_logging(self.name)
        publisher = watcher.Watcher(settings, watch_options)

        async def publish(stop: asyncio.Event) -> int:
            counts = await publisher.run(stop)
            skipped = counts.skipped or counts.skipped_experiments
            return exit_codes.INCOMPLETE if args.strict and skipped else exit_codes.OK

        return runner.run(publish)


COMMAND = WatchCommand()
