"""Every `stream-app` command by name: the module that holds it and its line in `--help`. Modules
are named, not imported: a command's module is imported only when it is chosen, so that
`stream-app --help` or `stream-app pass-at-k` never imports Faust or a Kafka client."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from stream_app.cli.command import Command


@dataclass(frozen=True)
class CommandInfo:
    """Where a command lives (a module whose `COMMAND` it is) and its line in `--help`."""

    module: str
    summary: str


COMMANDS: Final[dict[str, CommandInfo]] = {
    "replay": CommandInfo(
        "stream_app.commands.replay",
        "run a file of run-completed events, or experiment directories, through the core",
    ),
    "broker": CommandInfo(
        "stream_app.commands.broker", "run the embedded Tansu broker on 127.0.0.1 until Ctrl-C"
    ),
    "worker": CommandInfo(
        "stream_app.commands.worker", "run the streaming worker (Faust) until Ctrl-C"
    ),
    "produce": CommandInfo(
        "stream_app.commands.produce", "publish run-completed events to the input topic"
    ),
    "backtest": CommandInfo(
        "stream_app.commands.backtest",
        "replay history through the drop detectors and list every page they would raise",
    ),
    "demo": CommandInfo(
        "stream_app.commands.demo",
        "live demo: embedded broker, worker and producer, with a live table (Ctrl-C stops)",
    ),
    "watch": CommandInfo(
        "stream_app.commands.watch",
        "publish the finished runs of ProjectScylla experiment directories, then new ones",
    ),
    "observe": CommandInfo(
        "stream_app.commands.observe",
        "Prometheus and Alertmanager on loopback against the local worker(s), with the "
        "project's rules; alerts printed as they arrive (Ctrl-C stops)",
    ),
    "tail": CommandInfo(
        "stream_app.commands.tail",
        "print the records of an output topic as they arrive (aggregates, grades, reports, dlq)",
    ),
    "status": CommandInfo(
        "stream_app.commands.status",
        "the experiments a worker group holds now (query API), or one experiment's tiers",
    ),
    "codebleu": CommandInfo(
        "stream_app.commands.codebleu",
        "CodeBLEU of a candidate file against a reference file, as JSON",
    ),
    "pass-at-k": CommandInfo(
        "stream_app.commands.pass_at_k", "unbiased pass@k for n samples with c correct, as JSON"
    ),
}
"""Every command, in the order `stream-app --help` lists them."""


def load_command(name: str) -> Command:
    """The command called `name`, its module imported now."""
    command: Command = importlib.import_module(COMMANDS[name].module).COMMAND
    return command
