"""Requests through real forwarding proxies on loopback (tests/proxies.py), judged from their logs."""

from __future__ import annotations

import socket

import pytest

from crawler.config import load_config
from crawler.devserver import SiteServer
from crawler.errors import BlockedAddress, ConfigError, ProxyError
from crawler.protocols.http import HttpProtocol
from crawler.protocols.proxy import ProxyRoutes
from tests.conftest import DEMO_SITE
from tests.proxies import HttpProxy, Socks5Proxy
from tests.tlscerts import make_ca

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "ALL_PROXY",
                   "all_proxy")
# The crawler's own pins send site.test to an address where nothing listens: a page that arrives came
# through the proxy, which resolves site.test to the server itself.
CRAWLER_PINS = "http.resolve={site.test: 127.0.0.9, direct.test: 127.0.0.1, www.direct.test: 127.0.0.1}"
PROXY_PINS = {"site.test": "127.0.0.1"}


@pytest.fixture(autouse=True)
def no_proxy_variables(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def site():
    async with SiteServer(DEMO_SITE) as server:
        yield server


async def _fetch(url: str, *overrides: str):
    protocol = HttpProtocol(load_config(None, ["http.allow_private_networks=true", CRAWLER_PINS, *overrides]))
    try:
        return await protocol.fetch(url)
    finally:
        await protocol.aclose()


class TestHttpProxy:
    async def test_http_target_is_sent_to_the_proxy(self, site):
        async with HttpProxy(resolve=PROXY_PINS) as proxy:
            response = await _fetch(f"http://site.test:{site.port}/", f"http.proxy={proxy.url}")
        assert response.status == 200 and b"Fernhill" in response.body
        assert proxy.log == [("GET", f"http://site.test:{site.port}/")]
        assert site.paths() == ["/"]
        assert response.peer_ip is None  # the peer was the proxy, not the site

    async def test_https_target_is_tunnelled_and_checked_by_name(self, tmp_path):
        """CONNECT names the host; TLS runs end to end, with SNI and the certificate check on that name."""
        ca = make_ca(tmp_path)
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("site.test")) as tls_site, \
                HttpProxy(resolve=PROXY_PINS) as proxy:
            response = await _fetch(f"https://site.test:{tls_site.port}/", f"http.proxy={proxy.url}",
                                    f"http.tls.ca_file={ca.ca_file}")
        assert response.status == 200 and b"Fernhill" in response.body
        assert proxy.log == [("CONNECT", f"site.test:{tls_site.port}")]
        assert ca.sni == ["site.test"]

    @pytest.mark.parametrize("scheme", ["http", "https"])
    async def test_https_proxy_speaks_tls_to_the_proxy_too(self, tmp_path, scheme):
        """An https:// proxy: TLS to the proxy (checked against its name), then the request or tunnel."""
        ca = make_ca(tmp_path)
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("site.test") if scheme == "https" else None) as site, \
                HttpProxy(resolve=PROXY_PINS, ssl_context=ca.server("proxy.test")) as proxy:
            response = await _fetch(f"{scheme}://site.test:{site.port}/", f"http.tls.ca_file={ca.ca_file}",
                                    "http.resolve={site.test: 127.0.0.9, proxy.test: 127.0.0.1}",
                                    f"http.proxy=https://proxy.test:{proxy.port}")
        assert response.status == 200 and b"Fernhill" in response.body
        assert proxy.log == [("CONNECT", f"site.test:{site.port}")] if scheme == "https" else \
            [("GET", f"http://site.test:{site.port}/")]
        assert ca.sni[0] == "proxy.test"

    @pytest.mark.parametrize(("bypass", "host"), [
        ("[direct.test]", "direct.test"),
        ("[direct.test]", "www.direct.test"),       # a name covers its subdomains
        ("[.direct.test]", "www.direct.test"),
        ("['127.0.0.0/8']", "127.0.0.1"),           # a network covers literal hosts...
        ("['127.0.0.0/8']", "direct.test"),         # ...and names resolving into it
        ("['*']", "direct.test"),
    ])
    async def test_bypassed_hosts_go_direct(self, site, bypass, host):
        async with HttpProxy(resolve=PROXY_PINS) as proxy:
            response = await _fetch(f"http://{host}:{site.port}/", f"http.proxy={proxy.url}",
                                    f"http.proxy_bypass={bypass}")
        assert response.status == 200
        assert proxy.log == []
        assert site.paths() == ["/"]

    async def test_proxy_that_cannot_be_reached_is_a_proxy_error(self, site):
        with socket.socket() as sock:  # a loopback port nothing listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        with pytest.raises(ProxyError, match="cannot connect to the proxy") as caught:
            await _fetch(f"http://site.test:{site.port}/", f"http.proxy=http://127.0.0.1:{port}")
        assert caught.value.kind == "proxy"

    async def test_refused_tunnel_is_a_proxy_error(self, site):
        async with HttpProxy(resolve={}) as proxy:  # knows no name: answers 502
            with pytest.raises(ProxyError, match="the proxy answered 502"):
                await _fetch(f"https://site.test:{site.port}/", f"http.proxy={proxy.url}")


class TestAddressGuard:
    GUARD = ("http.allow_private_networks=false", "http.private_allowlist=['127.0.0.0/8']",
             "http.resolve={good.test: 127.0.0.1, bad.test: 10.9.9.9, meta.test: '64:ff9b::a9fe:a9fe'}")

    @pytest.mark.parametrize("url", ["http://bad.test:8080/", "https://bad.test/", "http://meta.test/",
                                     "http://10.9.9.9/", "http://[::ffff:10.9.9.9]/"])
    async def test_refused_target_never_reaches_the_proxy(self, url):
        async with HttpProxy(resolve={"bad.test": "127.0.0.1"}) as proxy:
            protocol = HttpProtocol(load_config(None, [*self.GUARD, f"http.proxy={proxy.url}"]))
            try:
                with pytest.raises(BlockedAddress):
                    await protocol.fetch(url)
            finally:
                await protocol.aclose()
        assert proxy.log == []

    async def test_allowed_target_goes_through_a_proxy_named_by_host_name(self, site):
        """The proxy's own name may resolve to a private address: the user named it. The target's answer,
        seen by the crawler as public, is what the guard judges; the proxy resolves on its own."""
        async with HttpProxy(resolve={"far.test": "127.0.0.1"}) as proxy:
            protocol = HttpProtocol(load_config(None, [
                "http.allow_private_networks=false",
                "http.resolve={proxy.test: 127.0.0.1, far.test: 192.0.43.10}",
                f"http.proxy=http://proxy.test:{proxy.port}",
            ]))
            try:
                response = await protocol.fetch(f"http://far.test:{site.port}/")
                with pytest.raises(BlockedAddress):  # the proxy's name is no way around the guard
                    await protocol.fetch(f"http://proxy.test:{site.port}/")
            finally:
                await protocol.aclose()
        assert response.status == 200
        assert proxy.log == [("GET", f"http://far.test:{site.port}/")]


class TestTrustEnv:
    async def test_variables_are_ignored_unless_asked(self, site, monkeypatch):
        async with HttpProxy(resolve={"direct.test": "127.0.0.1"}) as proxy:
            monkeypatch.setenv("HTTP_PROXY", proxy.url)
            response = await _fetch(f"http://direct.test:{site.port}/")
        assert response.status == 200
        assert proxy.log == []

    async def test_http_proxy_variable_with_trust_env(self, site, monkeypatch):
        async with HttpProxy(resolve=PROXY_PINS) as proxy:
            monkeypatch.setenv("HTTP_PROXY", proxy.url)
            monkeypatch.setenv("NO_PROXY", "direct.test:8080, 10.0.0.0/8")
            response = await _fetch(f"http://site.test:{site.port}/", "http.trust_env=true")
            direct = await _fetch(f"http://direct.test:{site.port}/", "http.trust_env=true")
        assert response.status == direct.status == 200
        assert proxy.log == [("GET", f"http://site.test:{site.port}/")]
        assert site.paths() == ["/", "/"]

    def test_bad_variable_names_itself(self, monkeypatch):
        monkeypatch.setenv("HTTPS_PROXY", "proxy.example:3128")
        with pytest.raises(ConfigError, match="HTTPS_PROXY = 'proxy.example:3128' .*http.trust_env"):
            ProxyRoutes.from_config(load_config(None, ["http.trust_env=true"]).http)

    @pytest.mark.parametrize("value", ["ftp://proxy:21", "proxy:3128", "http://"])
    def test_bad_proxy_key_names_the_key(self, value):
        with pytest.raises(ConfigError, match=r"http\.proxy = "):
            load_config(None, [f"http.proxy={value}"])


class TestSocks:
    async def test_socks5_is_asked_for_the_address_the_crawler_checked(self, site):
        async with Socks5Proxy() as proxy:
            response = await _fetch(f"http://direct.test:{site.port}/", f"http.proxy={proxy.url}")
        assert response.status == 200 and b"Fernhill" in response.body
        assert proxy.log == [("ipv4", f"127.0.0.1:{site.port}")]

    async def test_socks5h_hands_the_name_to_the_proxy(self, site):
        """socks5h: the proxy resolves the target; the proxy's own name goes through http.resolve."""
        async with Socks5Proxy(resolve=PROXY_PINS) as proxy:
            response = await _fetch(f"http://site.test:{site.port}/",
                                    "http.resolve={site.test: 127.0.0.9, socks.test: 127.0.0.1}",
                                    f"http.proxy=socks5h://socks.test:{proxy.port}")
        assert response.status == 200
        assert proxy.log == [("name", f"site.test:{site.port}")]

    async def test_https_through_socks5_checks_the_name(self, tmp_path):
        ca = make_ca(tmp_path)
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("direct.test")) as tls_site, Socks5Proxy() as proxy:
            response = await _fetch(f"https://direct.test:{tls_site.port}/", f"http.proxy={proxy.url}",
                                    f"http.tls.ca_file={ca.ca_file}")
        assert response.status == 200
        assert proxy.log == [("ipv4", f"127.0.0.1:{tls_site.port}")]
        assert ca.sni == ["direct.test"]

    async def test_socks5_guard_refuses_before_the_proxy(self):
        async with Socks5Proxy() as proxy:
            protocol = HttpProtocol(load_config(None, [*TestAddressGuard.GUARD, f"http.proxy={proxy.url}"]))
            try:
                with pytest.raises(BlockedAddress):
                    await protocol.fetch("http://bad.test/")
            finally:
                await protocol.aclose()
        assert proxy.log == []
