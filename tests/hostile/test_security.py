"""Nothing from the web gets in unless configured: loopback-only endpoint, no file: reads, no private addresses."""

from __future__ import annotations

import asyncio

import pytest

from crawler.config import CrawlerConfig, load_config
from crawler.daemon.endpoint import Endpoint, parse_listen
from crawler.daemon.status import DaemonStatus
from crawler.errors import BlockedAddress
from crawler.metrics import Metrics
from crawler.protocols.file import FileProtocol
from crawler.protocols.http import HttpProtocol
from tests.fetcher.conftest import fetch, page, redirect

DEFAULT_POLICY = ("http.allow_private_networks=false",)  # the default, restated over make_cfg's allowance


class TestEndpoint:
    async def test_metrics_endpoint_binds_loopback_by_default(self):
        """The default metrics.listen is a loopback address; bound there, other local addresses cannot reach it."""
        host, _ = parse_listen(CrawlerConfig().metrics.listen)
        assert host == "127.0.0.1"
        endpoint = Endpoint(Metrics(), DaemonStatus())
        bound_host, port = await endpoint.start(f"{host}:0")  # the default host; port 0 to stay free of clashes
        try:
            assert bound_host == "127.0.0.1"
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            with pytest.raises(OSError):  # not 0.0.0.0: another address of this machine is refused
                await asyncio.open_connection("127.0.0.2", port)
        finally:
            await endpoint.stop()


class TestFileUrls:
    async def test_file_protocol_is_off_by_default(self):
        """With the default config, a file: URL is refused before the disk is touched."""
        assert CrawlerConfig().protocols.file.enabled is False
        with pytest.raises(BlockedAddress, match="protocols.file.enabled"):
            await FileProtocol(CrawlerConfig()).fetch("file:///etc/passwd")

    async def test_file_url_in_a_fetchlist_is_not_read(self, tmp_path):
        """Even when urls.schemes lets file: URLs through, the fetcher records /etc/passwd as failed, unread."""
        _, rows, _ = await fetch(tmp_path, ["file:///etc/passwd"], "urls.schemes=[http, https, file]")
        row = rows["file:///etc/passwd"]
        assert row["status"] == "failed" and row["reason"].startswith("blocked_address")
        assert row["content_length"] is None


class TestPrivateAddresses:
    async def test_loopback_server_is_never_contacted_by_default(self, tmp_path, servers):
        """With the default address policy a loopback URL is refused and its server sees no connection at all."""
        server = await servers("127.0.0.1", {"/": page(), "/robots.txt": page("")})
        _, rows, _ = await fetch(tmp_path, [server.url("/")], *DEFAULT_POLICY)
        assert rows[server.url("/")]["status"] == "failed"
        assert rows[server.url("/")]["reason"].startswith("blocked_address")
        assert server.paths() == []

    async def test_name_pinned_to_a_private_address_is_refused_before_connecting(self):
        """A name resolving to 10.x is refused by the resolver itself (blocked_address, not a connect error)."""
        cfg = load_config(None, ["http.resolve={inside.test: 10.9.9.9}"])
        protocol = HttpProtocol(cfg)
        try:
            with pytest.raises(BlockedAddress, match="resolves only to private"):
                await protocol.fetch("http://inside.test/")
            with pytest.raises(BlockedAddress, match="private address"):
                await protocol.fetch("http://[fd00::1]/")
        finally:
            await protocol.aclose()

    @pytest.mark.parametrize("target", ["http://10.1.2.3/", "http://pinned.test/x", "file:///etc/passwd",
                                        "http://[::ffff:192.168.0.1]/"])
    async def test_redirect_cannot_reach_private_or_local(self, tmp_path, servers, target):
        """A public-looking page redirecting to a private address, a pinned name or file: gets nothing from it."""
        server = await servers("127.0.0.3", {"/go": redirect(target, 302)})
        _, rows, _ = await fetch(tmp_path, [server.url("/go")], *DEFAULT_POLICY,
                                 "http.private_allowlist=[127.0.0.3/32]", "http.resolve={pinned.test: 192.168.7.7}")
        assert rows[server.url("/go")]["status"] in ("redirect_temp", "gone")
        fetched = [r for u, r in rows.items() if u != server.url("/go")]
        assert all(r["status"] == "failed" and r["reason"].startswith("blocked_address") for r in fetched), fetched
        assert all(r["content_length"] is None for r in fetched)
