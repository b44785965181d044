"""`stream-app worker`: checks what a user can get wrong (port taken, broker down), answers
`/healthz` while it waits for the broker, creates the topics, then runs the Faust worker until
SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
from typing import TYPE_CHECKING, Any

from stream_app import exit_codes
from stream_app.cli import options, runner
from stream_app.cli.command import Command
from stream_app.errors import UserError
from stream_app.ports import cannot_listen
from stream_app.service.settings import Settings

if TYPE_CHECKING:
    from stream_app.service.web import WaitingPages

log = logging.getLogger(__name__)


class StartupError(UserError):
    """A problem the user can fix, reported as one line."""


def _port_error(host: str, port: int, exc: OSError) -> StartupError:
    if exc.errno == errno.EADDRINUSE:
        return StartupError(f"web port {host}:{port} is already in use (set EVALSTREAM_WEB_PORT)")
    return StartupError(f"cannot bind the web port {host}:{port}: {exc.strerror or exc}")


def check_port_free(host: str, port: int) -> None:
    """Fail with a fixable one-line error before Faust fails with a traceback on a taken port."""
    problem = cannot_listen(host, port)
    if problem is not None:
        raise _port_error(host, port, problem)


async def prepare(settings: Settings) -> Settings:
    """Wait for the broker and create the topics, so the worker starts against a ready cluster;
    the settings with the broker's kind told."""
    from stream_app.service.kafka_client import check_reads, resolve_broker, wait_for_broker
    from stream_app.service.topology import create_topics, source_topics

    await wait_for_broker(settings)
    created = await create_topics(settings)
    if created:
        log.info("created topics: %s", ", ".join(created))
    await check_reads(settings, source_topics(settings), settings.app_id)
    return await resolve_broker(settings)


async def open_waiting_pages(settings: Settings) -> WaitingPages:
    """`/healthz` and `/readyz` on the web port from the start, before the broker is reached."""
    from stream_app.service.web import WaitingPages

    pages = WaitingPages(settings.web_bind, settings.web_port)
    try:
        await pages.start()
    except OSError as exc:
        raise _port_error(settings.web_bind, settings.web_port, exc) from None
    return pages


async def wait_for_cluster(settings: Settings, stop: asyncio.Event) -> Settings | None:
    """`prepare`, unless `stop` (SIGINT or SIGTERM) comes first: then None."""
    preparing = asyncio.ensure_future(prepare(settings))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((preparing, stopping), return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            return None
        return preparing.result()  # its exception, if it failed
    finally:
        for task in (preparing, stopping):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def run_worker(settings: Settings) -> int:
    """`stream-app worker`: the streaming service itself; blocks until it stops, returns its exit
    code."""
    runner.configure_worker_logging(settings.log_level)
    check_port_free(settings.web_bind, settings.web_port)
    # Faust handles SIGINT and SIGTERM once it runs; until then a worker told to stop while it
    # waits for its broker, or while Faust is being built, stops here, cleanly.
    loop = runner.CommandLoop()
    try:
        pages = loop.run(open_waiting_pages(settings))
        try:
            prepared = loop.run(wait_for_cluster(settings, loop.stop))
            if prepared is None:
                log.info("evalstream worker: stopped while waiting for the broker")
                return exit_codes.OK
            settings = prepared
            # Made while the waiting pages still answer: importing and building Faust takes a
            # second, the port is then handed over within milliseconds.
            worker = faust_worker(settings, loop.loop)
            loop.run(asyncio.sleep(0.01))  # a signal that came meanwhile
            if loop.stop.is_set():
                log.info("evalstream worker: stopped before it started")
                return exit_codes.OK
        finally:
            loop.run(pages.close())
            loop.release_signals()
    except KeyboardInterrupt:
        return exit_codes.INTERRUPTED
    log.info(
        "evalstream worker: broker %s, metrics on http://%s:%d/metrics",
        ",".join(settings.bootstrap_servers),
        settings.web_bind,
        settings.web_port,
    )
    try:
        # mode ends by SystemExit, always: an exception is logged and made exit 1 inside it (a
        # refusal of the broker's ACLs included: what no retry mends was checked before this)
        worker.execute_from_commandline()
    except SystemExit as exc:
        return exit_codes.OK if exc.code in (None, 0) else exit_codes.FATAL
    return exit_codes.OK


def faust_worker(settings: Settings, loop: asyncio.AbstractEventLoop) -> Any:
    """The Faust worker of evalstream's app, not started."""
    import faust
    from prometheus_client import disable_created_metrics

    from stream_app.service.app import create_app

    # The worker's process is evalstream's alone, so `_created` series are not made at all (the
    # exporter would make and drop them at every scrape); prometheus_client's switch for that is
    # process-wide, hence here, in the command, and not where the exporter is defined.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    return faust.Worker(
        create_app(settings),
        loop=loop,
        loglevel=settings.log_level.upper(),
        quiet=True,
        redirect_stdouts=False,
        override_logging=False,
    )


class WorkerCommand(Command):
    """Runs `run_worker` with the settings of `--broker`, the environment and `--config`."""

    name = "worker"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """`--broker` and `--config`."""
        options.add_broker(parser)
        options.add_config(parser)

    def run(self, args: argparse.Namespace) -> int:
        """The worker's exit status."""
        return run_worker(options.settings_of(args))


COMMAND = WorkerCommand()
