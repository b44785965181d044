"""The `stream-app` entry point: finds the chosen command in the registry, lets it declare its
arguments, runs it, and maps what it raised to an exit status (`stream_app.exit_codes`). The one
place where errors meet the terminal: a user error is one line on stderr, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from stream_app import __version__, exit_codes
from stream_app.cli.command import Command
from stream_app.cli.registry import COMMANDS, load_command
from stream_app.errors import UserError


class Parser(argparse.ArgumentParser):
    """argparse, its errors one line like the commands' own (`stream-app tail: error: ...`)."""

    def error(self, message: str) -> NoReturn:
        """Print `<prog>: error: <message>` and exit 2, without the usage (`--help` has it)."""
        self.exit(exit_codes.USAGE, f"{self.prog}: error: {message}\n")


def parse(argv: Sequence[str]) -> tuple[Command, argparse.Namespace]:
    """The command `argv` chooses, with its parsed arguments; only that command's module is
    imported. argparse exits (2, one line) on arguments it refuses, (0) after `--help`."""
    parser = Parser(
        prog="stream-app",
        description="evalstream: streaming metrics for AI coding-agent evaluations.",
    )
    parser.add_argument("--version", action="version", version=f"evalstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = {name: sub.add_parser(name, help=info.summary) for name, info in COMMANDS.items()}
    # The first word that is not an option names the command: the top level has no option that
    # takes a value.
    chosen = next((word for word in argv if not word.startswith("-")), "")
    command = load_command(chosen) if chosen in COMMANDS else None
    if command is not None:
        parsers[chosen].description = command.description
        command.add_arguments(parsers[chosen])
    args = parser.parse_args(argv)
    assert command is not None  # argparse has exited on a missing or unknown command
    return command, args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` (default: the process's arguments) names; its exit status."""
    command, args = parse(sys.argv[1:] if argv is None else argv)
    try:
        return command.run(args)
    except UserError as exc:
        message = " ".join(str(exc).splitlines())
        print(f"stream-app {command.name}: error: {message}", file=sys.stderr)
        return exit_codes.USAGE
    except KeyboardInterrupt:
        return exit_codes.INTERRUPTED
    except BrokenPipeError:
        # `stream-app tail dlq | head`: the reader is gone, and so is the need to print more;
        # stdout to /dev/null, so that flushing it at exit does not fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exit_codes.OK
