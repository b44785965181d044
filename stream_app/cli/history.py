"""The history `replay` and `backtest` read, one way for both: a JSON-lines file, `-` for stdin,
or directories of runs (ProjectScylla experiments, inspect_ai logs), through one `Replay`; what
was left out said on stderr."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import ClassVar

from schemas.replay_report import SkippedRun
from stream_app.cli import options
from stream_app.cli.command import Command
from stream_app.core.replay import Replay
from stream_app.errors import UserError, unreadable
from stream_app.service.settings import Settings
from stream_app.sources.skipped import skipped_lines


class HistoryCommand(Command):
    """A command that reads history (`replay`, `backtest`): FILE|DIR..., a flag of its own
    (`flag`: the option and its help), `--retire` and `--config`."""

    flag: ClassVar[tuple[str, str]]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The history, the command's flag, `--retire` and `--config`."""
        options.add_history(parser)
        parser.add_argument(self.flag[0], action="store_true", help=self.flag[1])
        options.add_retire(parser)
        options.add_config(parser)

    def read(
        self, args: argparse.Namespace, watch: Callable[[bytes], None] | None = None
    ) -> tuple[Replay, list[SkippedRun], bool]:
        """The history the arguments name (see `read_history`)."""
        return read_history(args.paths, options.settings_of(args), args.retire, watch)


def read_history(
    names: Sequence[str],
    settings: Settings,
    retire: bool = False,
    watch: Callable[[bytes], None] | None = None,
) -> tuple[Replay, list[SkippedRun], bool]:
    """The history named on the command line read through one `Replay`, `watch` shown every
    event; also the runs of the directories that made no event, and whether they were
    directories.

    Raises:
        UserError: a path that cannot be read, or a directory with no experiment.
    """
    paths = [Path(name) for name in names]
    if len(paths) > 1 or paths[0].is_dir():
        from stream_app.sources.directories import replay_directories
        from stream_app.sources.run_mapping import RunMapping

        for path in paths:
            if not path.is_dir():
                raise UserError(f"{path} is not a directory (give one file, or directories)")
        mapping = RunMapping.of(settings)
        replay, skipped = replay_directories(paths, settings, retire, watch, mapping)
        return replay, skipped, True
    replay = Replay(settings, retire)
    if names[0] == "-":
        replay.feed_lines(_watched(sys.stdin.buffer, watch))
        return replay, [], False
    try:
        with paths[0].open("rb") as source:
            replay.feed_lines(_watched(source, watch))
    except OSError as exc:
        raise unreadable(paths[0], exc) from None
    return replay, [], False


def _watched(lines: Iterable[bytes], watch: Callable[[bytes], None] | None) -> Iterator[bytes]:
    """The lines, each shown to `watch` first (when there is one)."""
    for line in lines:
        if watch is not None:
            watch(line)
        yield line


def say_skipped(command: str, rejected: int, skipped: list[SkippedRun]) -> None:
    """What a replay left out, on stderr (the document on stdout has the details)."""
    if rejected:
        print(f"stream-app {command}: {rejected} line(s) rejected", file=sys.stderr)
    for line in skipped_lines(skipped):
        print(f"stream-app {command}: {line}", file=sys.stderr)
