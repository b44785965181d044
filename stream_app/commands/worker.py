"""`stream-app worker`: checks what a user can get wrong (port taken, broker down), creates the
topics, then runs the Faust worker until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket

from stream_app.service.settings import Settings

log = logging.getLogger(__name__)


class StartupError(Exception):
    """A problem the user can fix, reported as one line."""


def check_port_free(host: str, port: int) -> None:
    """Fail with a fixable one-line error before Faust fails with a traceback on a taken port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise StartupError(
                    f"web port {host}:{port} is already in use (set EVALSTREAM_WEB_PORT)"
                ) from None
            raise StartupError(f"cannot bind the web port {host}:{port}: {exc.strerror}") from None


async def prepare(settings: Settings) -> None:
    """Wait for the broker and create the topics, so the worker starts against a ready cluster."""
    from stream_app.service.app import all_topics
    from stream_app.service.kafka_client import ensure_topics, wait_for_broker

    await wait_for_broker(settings)
    created = await ensure_topics(settings, all_topics(settings))
    if created:
        log.info("created topics: %s", ", ".join(created))


def configure_logging(level: str) -> None:
    """One log format with the PID, so the lines of several workers can be told apart."""
    logging.basicConfig(
        level=level.upper(),
        format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s",
    )


def run_worker(settings: Settings) -> int:
    """`stream-app worker`: the streaming service itself; blocks until it stops, returns its exit
    code."""
    configure_logging(settings.log_level)
    check_port_free(settings.web_bind, settings.web_port)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(prepare(settings))
    except KeyboardInterrupt:
        return 130

    import faust

    from stream_app.service.app import create_app

    app = create_app(settings)
    worker = faust.Worker(
        app,
        loop=loop,
        loglevel=settings.log_level.upper(),
        quiet=True,
        redirect_stdouts=False,
        override_logging=False,
    )
    log.info(
        "evalstream worker: broker %s, metrics on http://%s:%d/metrics",
        ",".join(settings.bootstrap_servers),
        settings.web_bind,
        settings.web_port,
    )
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
