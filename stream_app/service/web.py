"""The worker's web pages: `/metrics` for Prometheus, `/healthz` (alive) and `/readyz` (joined
and recovered), so that probes and scrapers need nothing but HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import faust
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


def install_pages(app: faust.App, health: Health, metrics: Exporter) -> None:
    """Register the three pages on the Faust app's web server."""

    @app.page("/metrics")
    async def metrics_page(web: Any, request: Any) -> Any:
        # Made and sent a family at a time: a big worker's page is tens of megabytes, and the
        # event loop (`/healthz`, the agents) runs between two families.
        response = StreamResponse(headers={"Content-Type": CONTENT_TYPE})
        await response.prepare(request)
        for chunk in metrics.render_chunks():
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
