"""The daemon's HTTP endpoint: Prometheus ``/metrics`` and JSON ``/status`` on ``metrics.listen``."""

from __future__ import annotations

from aiohttp import web

from crawler.daemon.status import DaemonStatus
from crawler.errors import ConfigError
from crawler.metrics import CONTENT_TYPE_LATEST, Metrics


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9108`` for IPv6) -> (host, port); a clear config error otherwise."""
    host, sep, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"config error: metrics.listen = {listen!r}: expected HOST:PORT (port 0 picks a free one) "
                          "or empty to disable")
    return host, int(port)


class Endpoint:
    def __init__(self, metrics: Metrics, status: DaemonStatus) -> None:
        self.metrics = metrics
        self.status = status
        self._runner: web.AppRunner | None = None

    async def start(self, listen: str) -> tuple[str, int]:
        """Bind and serve; returns the bound (host, port), so ``:0`` reports the port it got."""
        host, port = parse_listen(listen)
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/status", self._status)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, host, port).start()
        except OSError as exc:
            await self.stop()
            raise ConfigError(f"config error: metrics.listen = {listen!r}: cannot listen ({exc.strerror or exc})") \
                from exc
        bound = self._runner.addresses[0]
        return bound[0], bound[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response(self.status.snapshot())
