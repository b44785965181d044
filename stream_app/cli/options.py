"""The options several `stream-app` commands share, and the argument types of all of them: one
definition each, so that an option reads, defaults and is refused the same way in every command.
An argument type raises `argparse.ArgumentTypeError`; argparse prints it as the command's one-line
error."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from stream_app.ports import split_host_port

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from stream_app.service.settings import Settings

T = TypeVar("T", bound="DataclassInstance")

SCENARIOS: Final = ("drop", "score-drop", "stationary", "spread")
"""The synthetic scenarios (`stream_app.synthetic.SCENARIOS`), named here so that a command's
`--help` does not import the generator."""
TIERS: Final = tuple(f"T{i}" for i in range(7))
"""The synthetic runs' tiers (`stream_app.synthetic.TIERS`), named here for the same reason."""

# ---- argument types -----------------------------------------------------------------------


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def positive_float(text: str) -> float:
    """A number above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def port(text: str) -> int:
    """A port to listen on: 1-65535."""
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def port_or_any(text: str) -> int:
    """A port, or 0: any free one."""
    return 0 if text.isdigit() and int(text) == 0 else port(text)


def host_port(text: str) -> str:
    """HOST:PORT of a server (`[::1]:6066` for IPv6), kept as written."""
    try:
        split_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (for example 127.0.0.1:6066)") from None
    return text.strip()


_DURATION: Final = re.compile(r"(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?")


def duration(text: str) -> str:
    """A positive Prometheus duration (`15s`, `1m30s`), or whole seconds (`2` is `2s`)."""
    value = text.strip()
    if value.isdigit():
        value += "s"
    if not value or text != text.strip() or not _DURATION.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 15s, 1m or 500ms")
    if not any(ch in "123456789" for ch in value):
        raise argparse.ArgumentTypeError(f"{text!r}: the duration must be longer than zero")
    return value


# ---- shared options -----------------------------------------------------------------------


def add_config(
    parser: argparse.ArgumentParser,
    help: str = "YAML or TOML config file (see docs/configuration.md)",
) -> None:
    """`--config FILE`: the settings file, under the environment and `--broker`."""
    parser.add_argument("--config", type=Path, metavar="FILE", help=help)


def add_broker(
    parser: argparse.ArgumentParser,
    help: str = "bootstrap servers, e.g. kafka://127.0.0.1:9092 "
    "(overrides EVALSTREAM_BROKER_URL and the config file)",
) -> None:
    """`--broker URL`: the broker, over the environment and the config file."""
    parser.add_argument("--broker", metavar="URL", help=help)


def settings_of(args: argparse.Namespace) -> Settings:
    """The command's settings: `--broker`, where the command has it, over the environment and
    `--config`, where it has that."""
    from stream_app.service.settings import load_settings

    broker = getattr(args, "broker", None)
    overrides = {"broker_url": broker} if broker is not None else {}
    return load_settings(getattr(args, "config", None), **overrides)


def options_of(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """The dataclass `cls` of a command's options, each field from the parsed option of its name
    (a field no option sets keeps its default), `given` over them."""
    names = {f.name for f in dataclasses.fields(cls)} & set(vars(args)) - set(given)
    return cls(**{name: getattr(args, name) for name in names}, **given)


def add_history(parser: argparse.ArgumentParser) -> None:
    """The history `replay` and `backtest` read (see `cli.history.read_history`)."""
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="FILE|DIR",
        help="a JSON-lines file, - for stdin, or directories of ProjectScylla experiments, "
        "inspect_ai logs or Harbor jobs",
    )


def add_retire(parser: argparse.ArgumentParser) -> None:
    """`--retire`: experiments retire by event time, as a live worker's would."""
    parser.add_argument(
        "--retire",
        action="store_true",
        help="retire experiments idle for experiment_idle_ttl_s of event time, as a worker that "
        "read the stream live would have (a retired tier starts afresh, its warm-up too)",
    )


def add_scenario(parser: argparse.ArgumentParser) -> None:
    """`--scenario`: which synthetic runs `produce --synthetic` and `demo --synthetic` make."""
    parser.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="drop",
        help="synthetic runs like the real ones' noise; 'drop' (the default) also makes "
        "synthetic-01's T5 mostly fail from halfway on, 'score-drop' keeps its pass rate but "
        "lowers its judge scores, 'stationary' changes nothing, 'spread' has stationary tiers "
        "at pass rates 5-95 %%",
    )
