"""The `stream-app` command. Errors the user can fix are one line on stderr, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from stream_app import __version__
from stream_app.config import ConfigError, load_settings
from stream_app.replay import replay_lines

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2


class UserError(Exception):
    """A problem the user can fix; printed as one line."""


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="YAML or TOML config file (see README)"
    )


def _cmd_replay(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    source: BinaryIO
    if args.file == "-":
        source = sys.stdin.buffer
        report = replay_lines(source, settings)
    else:
        path = Path(args.file)
        try:
            with path.open("rb") as source:
                report = replay_lines(source, settings)
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    sys.stdout.write(report.model_dump_json(indent=2))
    sys.stdout.write("\n")
    sys.stdout.flush()
    if report.rejected:
        print(f"stream-app replay: {len(report.rejected)} line(s) rejected", file=sys.stderr)
    return EXIT_REJECTED if args.strict and report.rejected else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-app",
        description="evalstream: streaming metrics for AI coding-agent evaluations.",
    )
    parser.add_argument("--version", action="version", version=f"evalstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    replay = sub.add_parser(
        "replay",
        help="run a JSON-lines file of run-completed events through the core; print the result",
        description=(
            "Replay run-completed events (one JSON object a line; '-' reads stdin) and print the "
            "final tier aggregates, cross-tier reports, rejected lines and ignored counts as JSON."
        ),
    )
    replay.add_argument("file", metavar="FILE", help="JSON-lines file, or - for stdin")
    replay.add_argument("--strict", action="store_true", help="exit 1 when any line was rejected")
    _add_config(replay)
    replay.set_defaults(handler=_cmd_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except (UserError, ConfigError) as exc:
        print(f"stream-app {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
