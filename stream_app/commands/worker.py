"""`stream-app worker`: checks what a user can get wrong (port taken, broker down), answers
`/healthz` while it waits for the broker, creates the topics, then runs the Faust worker until
SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
from typing import TYPE_CHECKING, Any

from stream_app.service.settings import Settings

if TYPE_CHECKING:
    from stream_app.service.web import WaitingPages

log = logging.getLogger(__name__)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StartupError(Exception):
    """A problem the user can fix, reported as one line."""


def _port_error(host: str, port: int, exc: OSError) -> StartupError:
    if exc.errno == errno.EADDRINUSE:
        return StartupError(f"web port {host}:{port} is already in use (set EVALSTREAM_WEB_PORT)")
    return StartupError(f"cannot bind the web port {host}:{port}: {exc.strerror or exc}")


def check_port_free(host: str, port: int) -> None:
    """Fail with a fixable one-line error before Faust fails with a traceback on a taken port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise _port_error(host, port, exc) from None


async def prepare(settings: Settings) -> Settings:
    """Wait for the broker and create the topics, so the worker starts against a ready cluster;
    the settings with the broker's kind told."""
    from stream_app.service.app import all_topics, source_topics
    from stream_app.service.kafka_client import (
        check_reads,
        ensure_topics,
        resolve_broker,
        wait_for_broker,
    )

    await wait_for_broker(settings)
    created = await ensure_topics(settings, all_topics(settings))
    if created:
        log.info("created topics: %s", ", ".join(created))
    await check_reads(settings, source_topics(settings), settings.app_id)
    return await resolve_broker(settings)


def configure_logging(level: str) -> None:
    """One log format with the PID, so the lines of several workers can be told apart."""
    logging.basicConfig(
        level=level.upper(),
        format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s",
    )


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
    configure_logging(settings.log_level)
    check_port_free(settings.web_bind, settings.web_port)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    # Faust handles SIGINT and SIGTERM once it runs; until then a worker told to stop while it
    # waits for its broker, or while Faust is being built, stops here, cleanly.
    stop = asyncio.Event()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        pages = loop.run_until_complete(open_waiting_pages(settings))
        try:
            prepared = loop.run_until_complete(wait_for_cluster(settings, stop))
            if prepared is None:
                log.info("evalstream worker: stopped while waiting for the broker")
                return 0
            settings = prepared
            # Made while the waiting pages still answer: importing and building Faust takes a
            # second, the port is then handed over within milliseconds.
            worker = faust_worker(settings, loop)
            loop.run_until_complete(asyncio.sleep(0.01))  # a signal that came meanwhile
            if stop.is_set():
                log.info("evalstream worker: stopped before it started")
                return 0
        finally:
            loop.run_until_complete(pages.close())
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
    except KeyboardInterrupt:
        return 130
    log.info(
        "evalstream worker: broker %s, metrics on http://%s:%d/metrics",
        ",".join(settings.bootstrap_servers),
        settings.web_bind,
        settings.web_port,
    )
    from stream_app.service.kafka_client import DENIED, denied

    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        return int(exc.code or 0)
    except DENIED as exc:  # ACLs that do not let it read or write what it must: no retry mends
        raise denied(settings, exc) from None
    return 0  # a refusal found only once running (a write): mode logged it and exited 1


def faust_worker(settings: Settings, loop: asyncio.AbstractEventLoop) -> Any:
    """The Faust worker of evalstream's app, not started."""
    import faust

    from stream_app.service.app import create_app

    return faust.Worker(
        create_app(settings),
        loop=loop,
        loglevel=settings.log_level.upper(),
        quiet=True,
        redirect_stdouts=False,
        override_logging=False,
    )
