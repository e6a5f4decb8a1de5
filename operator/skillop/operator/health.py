"""The health port: the liveness probe and ``/metrics``, on one small HTTP server.

It replaces kopf's own liveness endpoint (which serves only its probe path) so
that Prometheus scrapes the port the chart already exposes. The liveness path
answers 200 while the operator's event loop does (kopf's endpoint says no more
than that without probe handlers, and skillop registers none).
"""

from __future__ import annotations

import urllib.parse

import aiohttp.web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

METRICS_PATH = "/metrics"


class HealthServer:
    def __init__(self, endpoint: str, registry: CollectorRegistry) -> None:
        parts = urllib.parse.urlsplit(endpoint)
        if parts.scheme != "http" or parts.port is None:
            raise ValueError(f"SKILLOP_LIVENESS={endpoint!r}: expected http://HOST:PORT/PATH")
        self.host = parts.hostname or "0.0.0.0"
        self.port = parts.port
        self.path = parts.path or "/healthz"
        self.registry = registry
        self._runner: aiohttp.web.AppRunner | None = None

    async def start(self) -> None:
        app = aiohttp.web.Application()
        app.add_routes([aiohttp.web.get(self.path, self._health),
                        aiohttp.web.get(METRICS_PATH, self._metrics)])
        self._runner = aiohttp.web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0,
                                             access_log=None)
        await self._runner.setup()
        await aiohttp.web.TCPSite(self._runner, self.host, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _health(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.json_response({})

    async def _metrics(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        body = generate_latest(self.registry)
        # CONTENT_TYPE_LATEST carries a charset, which aiohttp wants apart.
        return aiohttp.web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
