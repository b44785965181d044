"""`stream-app produce`: publish run-completed events (a file, stdin, or synthetic runs) to the
input topic (`stream_app.sources.producer`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable
from pathlib import Path

from stream_app import exit_codes
from stream_app.cli import options
from stream_app.cli.command import Command
from stream_app.errors import UserError, unreadable


class ProduceCommand(Command):
    """Publishes every line, at `--rate` when given, with progress on stderr."""

    name = "produce"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """FILE or `--synthetic N` and how the synthetic runs are made; `--broker`, `--config`."""
        parser.add_argument(
            "file", nargs="?", metavar="FILE", help="JSON-lines file, or - for stdin"
        )
        parser.add_argument(
            "--synthetic", type=options.positive_int, metavar="N", help="publish N synthetic runs"
        )
        parser.add_argument(
            "--rate",
            type=options.positive_float,
            metavar="R",
            help="events per second (default: max)",
        )
        parser.add_argument(
            "--experiments",
            type=options.positive_int,
            default=3,
            help="synthetic experiments (3)",
        )
        options.add_scenario(parser)
        parser.add_argument(
            "--drop-tier",
            choices=options.TIERS,
            default="T5",
            help="tier that drops halfway (T5)",
        )
        parser.add_argument("--seed", type=int, default=7, help="synthetic random seed (7)")
        options.add_broker(parser)
        options.add_config(parser)

    def run(self, args: argparse.Namespace) -> int:
        """Publish the lines and say how many."""
        from stream_app.sources import producer
        from stream_app.synthetic import scenario, synthetic_lines

        settings = options.settings_of(args)
        lines: Iterable[bytes]
        total = None
        if args.synthetic is not None and args.file is not None:
            raise UserError("give FILE (or - for stdin) or --synthetic N, not both")
        if args.synthetic is not None:
            profiles, drop = scenario(args.scenario, args.drop_tier)
            lines = synthetic_lines(
                args.synthetic,
                experiments=args.experiments,
                seed=args.seed,
                drop=drop,
                profiles=profiles,
            )
            total = args.synthetic
        elif args.file == "-":
            lines = sys.stdin.buffer
        elif args.file:
            lines = read_lines(Path(args.file))
            total = len(lines)
        else:
            raise UserError("give FILE, - for stdin, or --synthetic N")
        asyncio.run(producer.produce(settings, lines, rate=args.rate, total=total))
        return exit_codes.OK


def read_lines(path: Path) -> list[bytes]:
    """The lines of the file to publish; a UserError saying why when it cannot be read."""
    if path.is_dir():
        raise UserError(f"{path} is a directory: give a JSON-lines file (or - for stdin)")
    try:
        return path.read_bytes().splitlines()
    except OSError as exc:
        raise unreadable(path, exc) from None


COMMAND = ProduceCommand()
