"""HTTPS against loopback servers with a private CA: what is trusted, and a failure in OpenSSL's words."""

from __future__ import annotations

import pytest
from aiohttp import web

from crawler.config import load_config
from crawler.devserver import SiteServer
from crawler.errors import ConfigError, TlsError
from crawler.fetcher.outcome import status_for_error
from crawler.models import FetchStatus
from crawler.protocols.http import HttpProtocol
from tests.conftest import DEMO_SITE, run_crawler, serve_app
from tests.tlscerts import make_ca

PIN = "http.resolve={site.test: 127.0.0.1, other.test: 127.0.0.1}"


async def _fetch(url: str, *overrides: str):
    protocol = HttpProtocol(load_config(None, ["http.allow_private_networks=true", PIN, *overrides]))
    try:
        return await protocol.fetch(url)
    finally:
        await protocol.aclose()


@pytest.fixture
def ca(tmp_path):
    return make_ca(tmp_path)


class TestVerification:
    async def test_certificate_of_a_trusted_ca_is_fetched_by_name(self, ca):
        """http.tls.ca_file is trusted; SNI and the host name check use the URL's name, not the pinned address."""
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("site.test")) as site:
            response = await _fetch(f"https://site.test:{site.port}/", f"http.tls.ca_file={ca.ca_file}")
        assert response.status == 200 and b"Fernhill" in response.body
        assert response.peer_ip == "127.0.0.1"  # the pinned address was reached (WARC-IP-Address)
        assert ca.sni == ["site.test"]

    @pytest.mark.parametrize(("case", "words"), [
        ("untrusted_ca", "certificate verify failed: unable to get local issuer certificate"),
        ("self_signed", "certificate verify failed: self-signed certificate"),
        ("expired", "certificate verify failed: certificate has expired"),
        ("wrong_name", "certificate verify failed: Hostname mismatch, certificate is not valid for 'site.test'"),
    ])
    async def test_failure_is_its_own_kind_named_as_openssl_says(self, ca, tmp_path, case, words):
        """Each broken certificate fails as kind tls (a retry), with OpenSSL's verify message."""
        trust = [] if case == "untrusted_ca" else [f"http.tls.ca_file={ca.ca_file}"]
        ctx = {"untrusted_ca": lambda: ca.server("site.test"), "self_signed": lambda: ca.self_signed(tmp_path),
               "expired": lambda: ca.server("site.test", expired=True),
               "wrong_name": lambda: ca.server("other.test")}[case]()
        async with SiteServer(DEMO_SITE, ssl_context=ctx) as site:
            with pytest.raises(TlsError) as caught:
                await _fetch(f"https://site.test:{site.port}/", *trust)
            assert site.requests == []
        assert caught.value.kind == "tls"
        assert str(caught.value).startswith(words)
        assert caught.value.summary == f"tls: {caught.value}"
        assert status_for_error(caught.value.kind) == FetchStatus.RETRY

    async def test_ip_literal_is_checked_against_the_certificate_address(self, ca):
        """A URL naming the address is checked against the certificate's IP entries, not a name."""
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("site.test")) as site:
            with pytest.raises(TlsError, match="IP address mismatch"):
                await _fetch(site.url("/"), f"http.tls.ca_file={ca.ca_file}")

    @pytest.mark.parametrize("case", ["self_signed", "expired", "wrong_name"])
    async def test_verify_off_fetches_what_a_broken_site_serves(self, ca, tmp_path, case):
        """http.tls.verify false: the archive keeps what the site serves, whatever its certificate."""
        ctx = {"self_signed": lambda: ca.self_signed(tmp_path),
               "expired": lambda: ca.server("site.test", expired=True),
               "wrong_name": lambda: ca.server("other.test")}[case]()
        async with SiteServer(DEMO_SITE, ssl_context=ctx) as site:
            response = await _fetch(f"https://site.test:{site.port}/", "http.tls.verify=false")
        assert response.status == 200 and b"Fernhill" in response.body

    async def test_https_to_a_plain_http_server_is_a_handshake_failure(self):
        async with SiteServer(DEMO_SITE) as site:
            with pytest.raises(TlsError, match="^handshake failed: WRONG_VERSION_NUMBER"):
                await _fetch(f"https://site.test:{site.port}/")

    async def test_plain_http_to_a_tls_port_is_not_a_tls_error(self, ca):
        """http:// to an HTTPS port is the server's protocol, not a certificate: no tls kind."""
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("site.test")) as site:
            with pytest.raises(Exception) as caught:
                await _fetch(f"http://site.test:{site.port}/")
        assert getattr(caught.value, "kind", None) != "tls"


class TestConfig:
    @pytest.mark.parametrize(("content", "reason"), [
        (None, "no such file"),
        (b"not a certificate\n", "not a readable PEM bundle"),
    ])
    def test_bad_ca_file_names_the_key(self, tmp_path, content, reason):
        """A missing or non-PEM http.tls.ca_file stops the command with the key and the reason."""
        path = tmp_path / "ca.pem"
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(ConfigError, match=rf"http\.tls\.ca_file = .*{reason}"):
            load_config(None, [f"http.tls.ca_file={path}"])


class TestCommands:
    async def test_parse_check_error_line_names_the_certificate(self, ca, tmp_path):
        """parse-check's one-line error says tls and OpenSSL's words; with ca_file the page parses."""
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("site.test")) as site:
            url = f"https://site.test:{site.port}/"
            failed = await run_crawler("parse-check", url, "-D", "http.allow_private_networks=true", "-D", PIN)
            trusted = await run_crawler("parse-check", url, "-D", "http.allow_private_networks=true", "-D", PIN,
                                        "-D", f"http.tls.ca_file={ca.ca_file}")
        assert failed.code != 0
        assert failed.stderr.strip().splitlines()[-1] == (
            f"crawler: parse-check: {url}: tls: certificate verify failed: unable to get local issuer certificate")
        assert trusted.code == 0, trusted.stderr
        assert "Fernhill" in trusted.stdout

    async def test_redirect_from_http_to_https_is_followed_and_verified(self, ca):
        """An http:// page redirecting to https:// is fetched over TLS, checked against the name."""
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("site.test")) as site:
            async def to_https(request):
                raise web.HTTPMovedPermanently(f"https://site.test:{site.port}/")

            app = web.Application()
            app.router.add_get("/", to_https)
            async with serve_app(app) as plain:
                result = await run_crawler("parse-check", f"http://site.test:{plain}/",
                                           "-D", "http.allow_private_networks=true", "-D", PIN,
                                           "-D", f"http.tls.ca_file={ca.ca_file}")
        assert result.code == 0, result.stderr
        assert "Fernhill" in result.stdout
        assert [r.path_qs for r in site.requests] == ["/"]

    async def test_verify_off_warns_at_start(self, ca, tmp_path):
        """http.tls.verify false is never silent: a warning before the first request."""
        async with SiteServer(DEMO_SITE, ssl_context=ca.self_signed(tmp_path)) as site:
            result = await run_crawler("parse-check", f"https://site.test:{site.port}/", "-D", "log.format=json",
                                       "-D", "http.allow_private_networks=true", "-D", PIN,
                                       "-D", "http.tls.verify=false")
        assert result.code == 0, result.stderr
        warnings = [e for e in result.events() if e["event"] == "http.tls.verify_off"]
        assert len(warnings) == 1 and warnings[0]["level"] == "warning"
