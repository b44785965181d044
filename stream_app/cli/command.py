"""What every `stream-app` command is: a name, a description for its `--help`, its arguments, and
a `run` that returns the exit status. Its one-line summary is in the registry
(`stream_app.commands.COMMANDS`), so that `stream-app --help` imports no command."""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from typing import ClassVar


class Command(ABC):
    """One `stream-app` command. `run` returns an exit status (`stream_app.exit_codes`); a
    problem the user can fix is raised as an `errors.UserError`, which the CLI prints as one
    line and exits 2 on."""

    name: ClassVar[str]
    description: ClassVar[str | None] = None

    @abstractmethod
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare the command's arguments and options."""

    @abstractmethod
    def run(self, args: argparse.Namespace) -> int:
        """Do what the command does with the parsed `args`; the exit status."""
