"""The `stream-app` command. Errors the user can fix are one line on stderr, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from schemas.replay_report import SkippedRun
from stream_app import __version__
from stream_app.commands.broker import BrokerError
from stream_app.commands.demo import DemoError
from stream_app.commands.observe import add_observe_parser
from stream_app.commands.worker import StartupError
from stream_app.core.replay import Replay
from stream_app.service.settings import ConfigError, Settings, load_settings

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2


class UserError(Exception):
    """A problem the user can fix; printed as one line."""


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="YAML or TOML config file (see README)"
    )


def _add_broker(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker",
        metavar="URL",
        help="bootstrap servers, e.g. kafka://127.0.0.1:9092 "
        "(overrides EVALSTREAM_BROKER_URL and the config file)",
    )


def _settings(args: argparse.Namespace) -> Settings:
    """The command's settings: `--broker`, where the command has it, over env and config."""
    broker = getattr(args, "broker", None)
    overrides = {"broker_url": broker} if broker is not None else {}
    return load_settings(args.config, **overrides)


def _replayed(
    args: argparse.Namespace,
    settings: Settings,
    retire: bool = False,
    watch: Callable[[bytes], None] | None = None,
) -> tuple[Replay, list[SkippedRun], bool]:
    """The history `replay` and `backtest` read (one JSON-lines file, `-` for stdin, or
    ProjectScylla directories) through one `Replay`, `watch` shown every event; also the runs
    of the directories that made no event, and whether they were directories."""
    paths = [Path(name) for name in args.paths]
    if len(paths) > 1 or paths[0].is_dir():
        from stream_app.scylla.directory_replay import replay_directory_runs
        from stream_app.scylla.layout import WHAT_AN_EXPERIMENT_IS, experiment_dirs

        for path in paths:
            if not path.is_dir():
                raise UserError(f"{path} is not a directory (give one file, or directories)")
        for path in paths:
            if not experiment_dirs([path]):
                raise UserError(f"no ProjectScylla experiment in {path} ({WHAT_AN_EXPERIMENT_IS})")
        replay, skipped = replay_directory_runs(paths, settings, retire, watch)
        return replay, skipped, True
    replay = Replay(settings, retire)
    if args.paths[0] == "-":
        replay.feed_lines(_watched(sys.stdin.buffer, watch))
        return replay, [], False
    try:
        with paths[0].open("rb") as source:
            replay.feed_lines(_watched(source, watch))
    except OSError as exc:
        raise UserError(f"cannot read {paths[0]}: {exc.strerror or exc}") from None
    return replay, [], False


def _watched(lines: Iterable[bytes], watch: Callable[[bytes], None] | None) -> Iterator[bytes]:
    """The lines, each shown to `watch` first (when there is one)."""
    for line in lines:
        if watch is not None:
            watch(line)
        yield line


def _say_skipped(command: str, rejected: int, skipped: list[SkippedRun]) -> None:
    """What a replay left out, on stderr (the document on stdout has the details)."""
    if rejected:
        print(f"stream-app {command}: {rejected} line(s) rejected", file=sys.stderr)
    for run in skipped:
        print(
            f"stream-app {command}: skipped {run.path}: {run.reason}: {run.detail}", file=sys.stderr
        )


def _add_history(parser: argparse.ArgumentParser) -> None:
    """The history `replay` and `backtest` read (see `_replayed`)."""
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="FILE|DIR",
        help="a JSON-lines file, - for stdin, or ProjectScylla experiment directories",
    )


def _add_retire(parser: argparse.ArgumentParser) -> None:
    """`--retire`: experiments retire by event time, as a live worker's would."""
    parser.add_argument(
        "--retire",
        action="store_true",
        help="retire experiments idle for experiment_idle_ttl_s of event time, as a worker that "
        "read the stream live would have (a retired tier starts afresh, its warm-up too)",
    )


def _cmd_replay(args: argparse.Namespace) -> int:
    replay, skipped, _ = _replayed(args, load_settings(args.config), args.retire)
    report = replay.report().model_copy(update={"skipped_runs": skipped})
    sys.stdout.write(report.model_dump_json(indent=2))
    sys.stdout.write("\n")
    sys.stdout.flush()
    _say_skipped("replay", len(report.rejected), report.skipped_runs)
    problems = report.rejected or report.skipped_runs
    return EXIT_REJECTED if args.strict and problems else EXIT_OK


def _cmd_backtest(args: argparse.Namespace) -> int:
    from stream_app.commands.backtest import SubtestStreaks, backtest_report, render

    streaks = SubtestStreaks()
    replay, skipped, directories = _replayed(
        args, load_settings(args.config), args.retire, streaks.see
    )
    report = backtest_report(replay, skipped, streaks.notes())
    if args.json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        sys.stdout.write(render(report, "run" if directories else "line"))
    sys.stdout.flush()
    _say_skipped("backtest", report.rejected, report.skipped_runs)
    return EXIT_OK


def _add_backtest(sub: Any) -> None:
    backtest = sub.add_parser(
        "backtest",
        help="replay history through the drop detectors and list every page they would raise",
        description=(
            "Replay run-completed events (one JSON object a line; '-' reads stdin), or the "
            "finished runs of ProjectScylla experiment directories, through the worker's core "
            "and drop detectors with the settings in force, and print every page the worker "
            "would have raised, then why each tier did or did not page. Try a setting (e.g. "
            "EVALSTREAM_DROP_FALSE_PAGE_RUNS, --config FILE) on history before it pages anyone."
        ),
    )
    _add_history(backtest)
    backtest.add_argument(
        "--json", action="store_true", help="print one JSON document (schemas/json/backtest-report)"
    )
    _add_retire(backtest)
    _add_config(backtest)
    backtest.set_defaults(handler=_cmd_backtest)


def _cmd_broker(args: argparse.Namespace) -> int:
    import signal
    import time

    from stream_app.commands.broker import EmbeddedBroker

    stop = {"signal": 0}

    def _stop(signum: int, _frame: object) -> None:
        stop["signal"] = signum

    # Before the first line is printed: a Ctrl-C right after it must stop the broker cleanly.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    settings = load_settings(args.config)
    broker = EmbeddedBroker(port=args.port, binary=settings.tansu_bin).start()
    print(f"Tansu broker listening on {broker.address} (memory storage)", flush=True)
    print(f"  export EVALSTREAM_BROKER_URL={broker.url}", flush=True)
    print("Ctrl-C stops it.", flush=True)
    try:
        while not stop["signal"]:
            if broker.process is None or broker.process.poll() is not None:
                raise UserError("the broker exited unexpectedly")
            time.sleep(0.2)
    finally:
        broker.stop()
    print("broker stopped", flush=True)
    return EXIT_OK


def _cmd_worker(args: argparse.Namespace) -> int:
    from stream_app.commands.worker import run_worker

    return run_worker(_settings(args))


def _cmd_produce(args: argparse.Namespace) -> int:
    import asyncio

    from stream_app.commands.producer import produce
    from stream_app.commands.synthetic import scenario, synthetic_lines

    settings = _settings(args)
    lines: Iterable[bytes]
    total = None
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
        path = Path(args.file)
        if not path.is_file():
            raise UserError(f"cannot read {path}: no such file")
        lines = path.read_bytes().splitlines()
        total = len(lines)
    else:
        raise UserError("give FILE, - for stdin, or --synthetic N")
    asyncio.run(produce(settings, lines, rate=args.rate, total=total))
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from stream_app.commands.demo import DemoOptions, run_demo

    options = DemoOptions(
        synthetic=args.synthetic,
        scenario=args.scenario,
        rate=args.rate,
        duration=args.duration,
        watch=tuple(Path(d) for d in args.watch or ()),
        keep_workdir=args.keep_workdir,
    )
    return run_demo(_settings(args), options)


def _cmd_watch(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal

    from stream_app.commands.watch import Watcher, WatchError, WatchOptions

    options = WatchOptions(
        roots=tuple(Path(d) for d in args.dirs),
        once=args.once,
        state_path=args.state,
        resend=args.resend,
        poll_s=args.poll,
    )
    settings = _settings(args)
    # One line per broker attempt (kafka_client), not aiokafka's connection errors many a second.
    logging.basicConfig(level=logging.WARNING, format="watch: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        watcher = Watcher(settings, options)
    except WatchError as exc:
        raise UserError(str(exc)) from None

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            counts = await watcher.run(stop)
        except WatchError as exc:
            raise UserError(str(exc)) from None
        skipped = counts.skipped or counts.skipped_experiments
        return EXIT_REJECTED if args.strict and skipped else EXIT_OK

    return asyncio.run(main())


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def _cmd_tail(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import os
    import signal

    from stream_app.commands.tail import TailError, TailOptions, resolve_topic, tail

    settings = _settings(args)
    options = TailOptions(
        name=args.topic,
        from_beginning=args.from_beginning,
        max_records=args.max,
        timeout_s=args.timeout,
        as_json=args.json,
    )
    try:
        resolve_topic(settings, options.name)  # a typo is said before any broker is tried
    except TailError as exc:
        raise UserError(str(exc)) from None
    # One line per broker attempt (kafka_client), not aiokafka's connection errors.
    logging.basicConfig(level=logging.WARNING, format="tail: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await tail(settings, options, stop)

    try:
        return asyncio.run(main())
    except BrokenPipeError:
        # `stream-app tail dlq | head`: the reader is gone; so is the need to print more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _add_tail(sub: Any) -> None:
    tail = sub.add_parser(
        "tail",
        help="print the records of an output topic as they arrive (aggregates, grades, "
        "reports, dlq)",
        description=(
            "Print each record of an output topic on one readable line, or as a JSON line with "
            "--json. TOPIC is aggregates, grades, reports or dlq, or a topic's full name. "
            "New records only unless --from-beginning. Reads without a consumer group: it "
            "commits nothing and never disturbs the workers."
        ),
    )
    tail.add_argument("topic", metavar="TOPIC", help="aggregates, grades, reports, dlq, or a name")
    tail.add_argument(
        "--from-beginning",
        action="store_true",
        help="print what the topic holds first (default: only records that arrive from now)",
    )
    tail.add_argument(
        "--max", type=_positive_int, metavar="N", help="exit after N records (exit status 0)"
    )
    tail.add_argument(
        "--timeout",
        type=_positive_float,
        metavar="S",
        help="exit after S seconds (exit status 1 if --max records had not come by then)",
    )
    tail.add_argument(
        "--json",
        action="store_true",
        help="one JSON object a line: topic, partition, offset, timestamp, key, value",
    )
    _add_broker(tail)
    _add_config(tail)
    tail.set_defaults(handler=_cmd_tail)


def _cmd_codebleu(args: argparse.Namespace) -> int:
    from stream_app.code_quality.code_bleu import calculate_code_bleu

    settings = load_settings(args.config)
    texts = []
    for name in (args.candidate, args.reference):
        try:
            texts.append(Path(name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read {name}: {exc}") from None
    result = calculate_code_bleu(texts[0], texts[1], settings.code_bleu.weights, args.language)
    print(result.model_dump_json(indent=2))
    return EXIT_OK


def _cmd_pass_at_k(args: argparse.Namespace) -> int:
    import json

    from stream_app.metrics.pass_at_k import calculate_pass_at_k

    try:
        # Named as calculate_pass_at_k_for_multiple and the README name them, not bare "1".
        scores = {f"pass@{k}": calculate_pass_at_k(args.n, args.c, k) for k in args.k}
    except ValueError as exc:
        raise UserError(str(exc)) from None
    print(json.dumps({"n": args.n, "c": args.c, "pass_at_k": scores}, indent=2))
    return EXIT_OK


def _cmd_status(args: argparse.Namespace) -> int:
    from stream_app.commands.status import StatusError, status

    settings = load_settings(args.config)
    base = args.url or f"http://{settings.web_bind}:{settings.web_port}"
    try:
        print(status(base, args.experiment, args.json))
    except StatusError as exc:
        print(f"stream-app status: {exc}", file=sys.stderr)
        return EXIT_REJECTED
    return EXIT_OK


def _add_scenario(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        choices=("drop", "score-drop", "stationary", "spread"),
        default="drop",
        help="synthetic runs like the real ones' noise; 'drop' (the default) also makes "
        "synthetic-01's T5 mostly fail from halfway on, 'score-drop' keeps its pass rate but "
        "lowers its judge scores, 'stationary' changes nothing, 'spread' has stationary tiers "
        "at pass rates 5-95 %%",
    )


def _add_demo(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="live demo: embedded broker, worker and producer, with a live table (Ctrl-C stops)",
    )
    demo.add_argument(
        "--synthetic",
        type=int,
        metavar="N",
        help="N synthetic runs (each tier one run a second of event time) instead of the "
        "bundled real runs",
    )
    _add_scenario(demo)
    demo.add_argument(
        "--watch",
        nargs="+",
        metavar="DIR",
        help="publish the runs of ProjectScylla experiment directories as they finish",
    )
    demo.add_argument("--rate", type=float, default=60.0, help="events per second (60)")
    demo.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    demo.add_argument(
        "--broker",
        metavar="URL",
        help="use this broker instead of starting the embedded one "
        "(overrides EVALSTREAM_BROKER_URL and the config file)",
    )
    demo.add_argument(
        "--keep-workdir",
        action="store_true",
        help="keep the demo's temporary directory (worker and broker logs) and say where it is",
    )
    _add_config(demo)
    demo.set_defaults(handler=_cmd_demo)


def _add_watch(sub: Any) -> None:
    watch = sub.add_parser(
        "watch",
        help="publish the finished runs of ProjectScylla experiment directories, then new ones",
        description=(
            "Publish every finished run (run_result.json) of the experiment directories, or of "
            "the experiments in a results folder, as a run-completed event; keep watching for "
            "new runs until Ctrl-C. A state file keeps a restart from sending runs again."
        ),
    )
    watch.add_argument("dirs", nargs="+", metavar="DIR", help="experiment or results directories")
    watch.add_argument("--once", action="store_true", help="publish what is there, then exit")
    watch.add_argument(
        "--state",
        type=Path,
        metavar="FILE",
        help="the state file (default: one per broker and topic under $XDG_STATE_HOME/evalstream)",
    )
    watch.add_argument(
        "--resend", action="store_true", help="publish every run again (the worker drops dups)"
    )
    watch.add_argument(
        "--poll", type=float, metavar="S", help="rescan every S seconds instead of file events"
    )
    watch.add_argument(
        "--strict", action="store_true", help="exit 1 when any run directory was skipped"
    )
    _add_broker(watch)
    _add_config(watch)
    watch.set_defaults(handler=_cmd_watch)


def build_parser() -> argparse.ArgumentParser:
    """The `stream-app` command line, one sub-command per task, each with its handler."""
    parser = argparse.ArgumentParser(
        prog="stream-app",
        description="evalstream: streaming metrics for AI coding-agent evaluations.",
    )
    parser.add_argument("--version", action="version", version=f"evalstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    replay = sub.add_parser(
        "replay",
        help="run a file of run-completed events, or experiment directories, through the core",
        description=(
            "Replay run-completed events (one JSON object a line; '-' reads stdin), or the "
            "finished runs of ProjectScylla experiment directories, and print the final tier "
            "aggregates, cross-tier reports, rejected lines and ignored counts as JSON."
        ),
    )
    _add_history(replay)
    replay.add_argument(
        "--strict", action="store_true", help="exit 1 when any line (or run directory) was rejected"
    )
    _add_retire(replay)
    _add_config(replay)
    replay.set_defaults(handler=_cmd_replay)

    broker = sub.add_parser(
        "broker", help="run the embedded Tansu broker on 127.0.0.1 until Ctrl-C"
    )
    broker.add_argument("--port", type=int, default=9092, help="port (default 9092; 0 = any free)")
    _add_config(broker)
    broker.set_defaults(handler=_cmd_broker)

    worker = sub.add_parser("worker", help="run the streaming worker (Faust) until Ctrl-C")
    _add_broker(worker)
    _add_config(worker)
    worker.set_defaults(handler=_cmd_worker)

    produce = sub.add_parser("produce", help="publish run-completed events to the input topic")
    produce.add_argument("file", nargs="?", metavar="FILE", help="JSON-lines file, or - for stdin")
    produce.add_argument("--synthetic", type=int, metavar="N", help="publish N synthetic runs")
    produce.add_argument("--rate", type=float, metavar="R", help="events per second (default: max)")
    produce.add_argument("--experiments", type=int, default=3, help="synthetic experiments (3)")
    _add_scenario(produce)
    produce.add_argument("--drop-tier", default="T5", help="tier that drops halfway (T5)")
    produce.add_argument("--seed", type=int, default=7, help="synthetic random seed (7)")
    _add_broker(produce)
    _add_config(produce)
    produce.set_defaults(handler=_cmd_produce)

    for add in (_add_backtest, _add_demo, _add_watch, add_observe_parser, _add_tail):
        add(sub)

    status = sub.add_parser(
        "status",
        help="the experiments a worker group holds now (query API), or one experiment's tiers",
    )
    status.add_argument("experiment", nargs="?", metavar="EXPERIMENT", help="one experiment's id")
    status.add_argument(
        "--url", metavar="URL", help="a worker's web address (default: web_bind and web_port)"
    )
    status.add_argument("--json", action="store_true", help="print the API's JSON as it is")
    _add_config(status)
    status.set_defaults(handler=_cmd_status)

    codebleu = sub.add_parser(
        "codebleu", help="CodeBLEU of a candidate file against a reference file, as JSON"
    )
    codebleu.add_argument("candidate", metavar="CANDIDATE_FILE")
    codebleu.add_argument("reference", metavar="REFERENCE_FILE")
    codebleu.add_argument("--language", default="python", help="python (default) or any other")
    _add_config(codebleu)
    codebleu.set_defaults(handler=_cmd_codebleu)

    pass_at_k = sub.add_parser(
        "pass-at-k", help="unbiased pass@k for n samples with c correct, as JSON"
    )
    pass_at_k.add_argument("n", type=int, metavar="N", help="samples")
    pass_at_k.add_argument("c", type=int, metavar="C", help="correct samples")
    pass_at_k.add_argument("k", type=int, nargs="+", metavar="K", help="one or more k")
    pass_at_k.set_defaults(handler=_cmd_pass_at_k)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The `stream-app` entry point: errors a user can fix become one line and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except (UserError, ConfigError, BrokerError, StartupError, ConnectionError, DemoError) as exc:
        print(f"stream-app {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
