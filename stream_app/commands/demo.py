"""`stream-app demo`: the whole pipeline on one machine, live.

Starts the embedded broker (unless a broker is configured), one worker as a subprocess, and a
producer replaying the bundled real runs (or synthetic runs with an injected drop), and shows
a live table built from the output topics until Ctrl-C or `--duration`. Everything it started is
stopped by PID on the way out, whatever happens, and its temporary directory is removed (unless
`--keep-workdir`). A demo killed outright (SIGKILL) cannot: its watchdog stops the broker and the
worker, and the next demo removes the directory (`processes.orphans`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from stream_app import exit_codes
from stream_app.brokers.tansu import EmbeddedBroker
from stream_app.cli import runner
from stream_app.cli.command import Command
from stream_app.cli.options import (
    add_broker,
    add_config,
    add_scenario,
    options_of,
    positive_float,
    positive_int,
    settings_of,
)
from stream_app.errors import UserError
from stream_app.ports import free_port, port_open
from stream_app.processes import stop_signals
from stream_app.processes.orphans import Watchdog, claim, remove_orphaned_dirs
from stream_app.processes.worker_process import WorkerExited, WorkerProcess, metric_total
from stream_app.service import topology
from stream_app.service.kafka_client import groupless_consumer, wait_for_broker
from stream_app.service.settings import Settings
from stream_app.sources.producer import produce
from stream_app.sources.watcher import Watcher, WatchOptions
from stream_app.synthetic import scenario, synthetic_lines
from stream_app.terminal.live_table import LiveState, render
from stream_app.terminal.records import output_kinds


class DemoError(UserError):
    """The demo cannot run; the message is one line."""


@dataclass(frozen=True)
class DemoOptions:
    """What the user chose on the `stream-app demo` command line."""

    synthetic: int | None = None  # None: the bundled real runs
    scenario: str = "drop"  # of the synthetic runs: a key of synthetic.SCENARIOS
    rate: float = 60.0
    duration: float | None = None
    refresh_s: float = 0.5
    watch: tuple[Path, ...] = ()  # ProjectScylla experiment directories instead of a file
    keep_workdir: bool = False  # keep the logs and the worker's data after the demo


def bundled_runs() -> list[bytes]:
    """The 1,080 real runs shipped with the package (ProjectScylla, BSD 3-Clause)."""
    data = resources.files("stream_app").joinpath("data", "scylla-runs.jsonl").read_bytes()
    return [line for line in data.splitlines() if line.strip()]


def _check_alive(worker: WorkerProcess) -> None:
    try:
        worker.check_alive()
    except WorkerExited as exc:
        raise DemoError(f"the {exc}") from None


async def _wait_ready(worker: WorkerProcess) -> None:
    try:
        await worker.wait_ready_async(timeout=120)
    except (WorkerExited, TimeoutError) as exc:
        raise DemoError(f"the {exc}") from None


def _received(worker: WorkerProcess) -> float | None:
    try:
        return metric_total(worker.metrics(timeout=1), "evalstream_runs_received_total")
    except OSError:
        return None


async def _follow(settings: Settings, state: LiveState, stop: asyncio.Event) -> None:
    """Tail the four output topics of the table from the beginning into `state`."""
    topics = settings.topics
    kinds = output_kinds(settings)
    async with groupless_consumer(
        settings,
        topics.aggregates,
        topics.cross_tier,
        topics.grade_changes,
        topics.suite_tiers,
        auto_offset_reset="earliest",
    ) as consumer:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for messages in batch.values():
                for message in messages:
                    state.add(kinds[message.topic], message)


def _source(
    settings: Settings, options: DemoOptions, workdir: Path, stop: asyncio.Event
) -> tuple[Callable[[], Coroutine[Any, Any, object]], str, Callable[[bool], tuple[str, int]]]:
    """What the demo publishes: the publisher (made only when it starts, so a demo that fails
    before leaves no coroutine unawaited), a title, and what is published so far (a phrase, and
    the number of runs the worker will have processed when it caught up)."""
    if options.watch:
        watcher = Watcher(
            settings,
            WatchOptions(roots=options.watch, state_path=workdir / "watch-state.jsonl"),
            progress=None,
        )
        dirs = ", ".join(str(d) for d in options.watch)
        return (
            lambda: watcher.run(stop),
            f"runs of {dirs} as they finish",
            lambda _done: _found(watcher),
        )
    lines: Iterable[bytes]
    if options.synthetic:
        total = options.synthetic
        profiles, drop = scenario(options.scenario)
        lines = synthetic_lines(total, experiments=3, drop=drop, profiles=profiles)
        title = f"{total:,} synthetic runs, " + (
            f"a {options.scenario} injected into {drop.experiment}/{drop.tier} halfway"
            if drop
            else "no drop (stationary)"
        )
    else:
        runs = bundled_runs()
        total = len(runs)
        lines = runs
        title = f"{total:,} real runs (ProjectScylla, 3 experiments, T0-T6)"
    return (
        lambda: produce(
            settings, lines, rate=options.rate, total=total, progress=None, create_topics=False
        ),
        title,
        lambda done: (f"produced {'all ' if done else ''}at {options.rate:g}/s", total),
    )


def _found(watcher: Watcher) -> tuple[str, int]:
    counts = watcher.scanner.counts()
    phrase = f"watching: {counts.published:,} of {counts.found:,} runs published"
    return phrase + (f", {counts.skipped:,} skipped" if counts.skipped else ""), counts.published


async def _run(
    settings: Settings,
    options: DemoOptions,
    worker: WorkerProcess,
    note: str,
    workdir: Path,
    *,
    watchdog: Watchdog,
) -> None:
    metrics_url = f"http://{settings.web_bind}:{settings.web_port}/metrics"
    stop = asyncio.Event()
    publishing, source, published = _source(settings, options, workdir, stop)
    tty = sys.stdout.isatty()
    print(f"{note}; worker metrics: {metrics_url}", flush=True)
    try:  # `--duration` bounds the whole demo, an unreachable broker included
        await asyncio.wait_for(wait_for_broker(settings), options.duration)
    except TimeoutError:
        raise DemoError(
            f"broker {settings.broker_url} not reached within --duration {options.duration:g} s"
        ) from None
    await topology.create_topics(settings)
    watchdog.watch(worker.start().process)
    print("waiting for the worker to join the group…", flush=True)
    await _wait_ready(worker)

    state = LiveState()
    follower = asyncio.create_task(_follow(settings, state, stop))
    producer = asyncio.create_task(publishing())
    started = time.monotonic()
    last_plain = 0.0
    try:
        while True:
            _check_alive(worker)
            now = time.monotonic()
            processed = _received(worker)
            done = producer.done()
            phrase, total = published(done)
            header = (
                f"evalstream demo — {source}\n"
                f"{note} · {phrase} · "
                f"processed {int(processed or 0):,}/{total:,} · metrics {metrics_url} · "
                f"{'Ctrl-C stops' if options.duration is None else f'{options.duration:.0f} s run'}"
            )
            if tty:
                sys.stdout.write("\x1b[H\x1b[2J" + render(state, header, colour=True) + "\n")
                sys.stdout.flush()
            elif now - last_plain >= 5.0:
                last_plain = now
                print(render(state, header, colour=False) + "\n", flush=True)
            if done and producer.exception() is not None:
                raise DemoError(f"producer failed: {producer.exception()}")
            if options.duration is not None and now - started >= options.duration:
                break
            await asyncio.sleep(options.refresh_s)
    finally:
        stop.set()
        producer.cancel()
        for task in (producer, follower):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        print(render(state, "final state:", colour=tty), flush=True)


def run_demo(settings: Settings, options: DemoOptions) -> int:
    """`stream-app demo`: show the whole pipeline working live on one machine, until Ctrl-C or
    the duration; returns the exit code. Its temporary directory (logs, the worker's data) is
    removed on every way out unless `keep_workdir`."""
    # SIGTERM and SIGHUP as Ctrl-C until the event loop takes them over, so that they too clean
    # up (the broker and the worker run in sessions of their own: nothing else stops them).
    stopping = stop_signals()
    # SIGINT already raises KeyboardInterrupt.
    with runner.handling(set(stopping) - {signal.SIGINT}, _interrupt):
        tmp = Path(tempfile.gettempdir())
        if removed := len(remove_orphaned_dirs(tmp, f"{WORKDIR_PREFIX}*")):
            what = "directory" if removed == 1 else "directories"
            print(f"removed {removed} {what} left by killed demos in {tmp}", flush=True)
        workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        if not options.keep_workdir:  # kept means kept: even a killed demo's
            claim(workdir)
        try:
            _run_in(settings, options, workdir, stopping)
        finally:
            if options.keep_workdir:
                print(f"demo files (logs, the worker's data) kept in {workdir}", flush=True)
            else:
                # Everything is stopped by now; a second Ctrl-C must not leave the directory
                # half removed.
                with runner.handling(stopping, signal.SIG_IGN):
                    shutil.rmtree(workdir, ignore_errors=True)
    print("demo stopped", flush=True)
    return exit_codes.OK


WORKDIR_PREFIX = "evalstream-demo-"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run_in(
    settings: Settings, options: DemoOptions, workdir: Path, stopping: tuple[signal.Signals, ...]
) -> None:
    """The demo with its files in `workdir`; stops everything it started, whatever happens."""
    configured = "broker_url" in settings.model_fields_set
    broker: EmbeddedBroker | None = None
    worker: WorkerProcess | None = None
    loop: runner.CommandLoop | None = None
    watchdog = Watchdog().start()  # first: it stops what follows if this process is killed
    try:
        if port_open(settings.web_bind, settings.web_port):
            busy = settings.web_port
            settings = settings.model_copy(update={"web_port": free_port(settings.web_bind)})
            # Said, not silent: `stream-app observe` scrapes the configured port by default.
            moved = f"{settings.web_bind}:{settings.web_port}"
            print(
                f"web port {busy} is in use (another worker or demo?); this demo's worker serves "
                f"/metrics on {moved}: scrape it with `stream-app observe --target {moved}`",
                flush=True,
            )
        if not configured:
            broker = EmbeddedBroker(
                binary=settings.tansu_bin, log_file=workdir / "broker.log", on_start=watchdog.watch
            )
            settings = settings.model_copy(
                update={"broker_url": broker.url, "partitions": 4, "broker_kind": "tansu"}
            )
            broker.start()
            note = f"embedded broker {broker.address}"
        else:
            note = f"broker {settings.broker_url}"
        worker = WorkerProcess(
            workdir,
            broker_url=settings.broker_url,
            partitions=settings.partitions,
            port=settings.web_port,
            bind=settings.web_bind,
            # The embedded broker starts empty at every demo: tables on disk would outlive it
            # only to be discarded (table_store); in memory they start empty with it.
            env={
                "EVALSTREAM_BROKER_KIND": settings.broker_kind,
                **({} if configured else {"EVALSTREAM_STORE": "memory"}),
            },
        )
        loop = runner.CommandLoop(stopping, cancel=True)
        loop.run(_run(settings, options, worker, note, workdir, watchdog=watchdog))
    except (asyncio.CancelledError, KeyboardInterrupt):
        print("\nstopping…", flush=True)  # Ctrl-C is how a demo ends: not an error
    finally:
        try:
            if worker is not None:
                worker.stop()
        finally:
            try:
                if broker is not None:
                    broker.stop()
                if loop is not None:
                    loop.close()
            finally:
                watchdog.stop()  # everything is stopped: it has nothing left to do


class DemoCommand(Command):
    """Runs `run_demo` with the settings of `--broker`, the environment and `--config`."""

    name = "demo"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """What to publish, how fast and for how long; the broker; the work directory."""
        parser.add_argument(
            "--synthetic",
            type=positive_int,
            metavar="N",
            help="N synthetic runs (each tier one run a second of event time) instead of the "
            "bundled real runs",
        )
        add_scenario(parser)
        parser.add_argument(
            "--watch",
            nargs="+",
            metavar="DIR",
            help="publish the runs of ProjectScylla experiment directories as they finish",
        )
        parser.add_argument(
            "--rate", type=positive_float, default=60.0, help="events per second (60)"
        )
        parser.add_argument(
            "--duration", type=positive_float, metavar="S", help="stop after S seconds"
        )
        add_broker(
            parser,
            help="use this broker instead of starting the embedded one "
            "(overrides EVALSTREAM_BROKER_URL and the config file)",
        )
        parser.add_argument(
            "--keep-workdir",
            action="store_true",
            help="keep the demo's temporary directory (worker and broker logs) and say where it is",
        )
        add_config(parser)

    def run(self, args: argparse.Namespace) -> int:
        """The demo's exit status."""
        if args.watch and args.synthetic is not None:
            raise UserError(
                "give --watch DIR (your runs) or --synthetic N (made-up runs), not both"
            )
        demo = options_of(DemoOptions, args, watch=tuple(Path(d) for d in args.watch or ()))
        return run_demo(settings_of(args), demo)


COMMAND = DemoCommand()
