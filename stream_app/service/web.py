"""The worker's web pages: `/metrics` for Prometheus, `/healthz` (alive) and `/readyz` (joined
and recovered), so that probes and scrapers need nothing but HTTP. Faust serves them once it
runs; before that, while the worker waits for its broker, `WaitingPages` does, so a health check
does not mark a worker unhealthy (and restart it) just because Kafka is still starting."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import faust
from aiohttp import web as aiohttp_web
from aiohttp.web import StreamResponse

from stream_app import __version__
from stream_app.service.exporter import CONTENT_TYPE, Exporter


class Health:
    """Ready when the worker joined the group and recovered every table since the last rebalance."""

    def __init__(self, tables: Iterable[str]) -> None:
        self.tables = tuple(tables)
        self.recovered: set[str] = set()

    def ready(self, rebalancing: bool) -> bool:
        """Whether `/readyz` answers 200."""
        return not rebalancing and all(t in self.recovered for t in self.tables)


def install_pages(app: faust.App, health: Health, exporter: Exporter) -> None:
    """Register the three pages on the Faust app's web server."""

    @app.page("/metrics")
    async def metrics_page(web: Any, request: Any) -> Any:
        # Made and sent a chunk at a time (a family, or thousands of keys of one): a big
        # worker's page is tens of megabytes, and the event loop (`/healthz`, the agents) runs
        # between two chunks.
        response = StreamResponse(headers={"Content-Type": CONTENT_TYPE})
        await response.prepare(request)
        for chunk in exporter.render_chunks():
            await response.write(chunk)
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    @app.page("/healthz")
    async def healthz(web: Any, request: Any) -> Any:
        return web.json({"status": "alive", "version": __version__})

    @app.page("/readyz")
    async def readyz(web: Any, request: Any) -> Any:
        ready = health.ready(app.rebalancing)
        return web.json(
            {"ready": ready, "recovered": sorted(health.recovered)}, status=200 if ready else 503
        )


WAITING_FOR_BROKER = "waiting for the broker"


class WaitingPages:
    """`/healthz` 200 and `/readyz` 503 (anything else 503 too) on the worker's web port while it
    waits for its broker; closed just before Faust's own web server takes the port."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._runner: aiohttp_web.AppRunner | None = None

    async def start(self) -> None:
        """Listen on the web port.

        Raises:
            OSError: the port cannot be bound (taken, or not ours).
        """
        app = aiohttp_web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_route("*", "/{tail:.*}", self._waiting)
        # A short shutdown: a probe in flight must not hold the port Faust is about to bind.
        runner = aiohttp_web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await aiohttp_web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner

    async def close(self) -> None:
        """Stop listening and answer no more (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _healthz(self, request: aiohttp_web.Request) -> aiohttp_web.Response:
        return aiohttp_web.json_response(
            {"status": "alive", "version": __version__, "waiting_for": "broker"}
        )

    async def _readyz(self, request: aiohttp_web.Request) -> aiohttp_web.Response:
        return aiohttp_web.json_response(
            {"ready": False, "recovered": [], "waiting_for": "broker"}, status=503
        )

    async def _waiting(self, request: aiohttp_web.Request) -> aiohttp_web.Response:
        return aiohttp_web.json_response({"error": WAITING_FOR_BROKER}, status=503)
