"""The system's trusted certificates loaded at a context's first handshake (crawler/protocols/trust.py).

``SSL_CERT_FILE`` stands for the system store: OpenSSL's default paths read it, so a private CA put
there is what a default context trusts, on loopback and without touching the machine's store.
"""

from __future__ import annotations

import asyncio
import ssl

import pytest

from crawler.config import TlsConfig
from crawler.devserver import SiteServer
from crawler.protocols import tls
from crawler.protocols.trust import DeferredTrust, deferred_store
from tests.conftest import DEMO_SITE, run_crawler
from tests.tlscerts import make_ca


@pytest.fixture
def ca(tmp_path):
    return make_ca(tmp_path)


def _store_size(ctx: ssl.SSLContext) -> int:
    return ssl.SSLContext.cert_store_stats(ctx)["x509_ca"]  # the base class's: it does not load the store


async def _handshake(ctx: ssl.SSLContext, port: int) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    writer.close()
    await writer.wait_closed()


async def test_a_default_context_made_in_the_window_loads_the_store_at_its_first_handshake(ca, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))
    with deferred_store():
        ctx = ssl.create_default_context()
    assert isinstance(ctx, DeferredTrust)
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert _store_size(ctx) == 0
    async with SiteServer(DEMO_SITE, ssl_context=ca.server("localhost")) as site:
        await _handshake(ctx, site.port)
    assert _store_size(ctx) == 1  # the private CA, read from the "system store" then


async def test_a_deferred_context_still_refuses_what_the_store_does_not_trust(ca):
    with deferred_store():
        ctx = ssl.create_default_context()
    async with SiteServer(DEMO_SITE, ssl_context=ca.server("localhost")) as site:
        with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer certificate"):
            await _handshake(ctx, site.port)


def test_the_window_skips_the_store_only_for_a_context_that_checks_nothing(ca, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))
    with deferred_store():
        unchecked = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        unchecked.check_hostname, unchecked.verify_mode = False, ssl.CERT_NONE
        unchecked.set_default_verify_paths()
        checked = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        checked.set_default_verify_paths()
        explicit = ssl.create_default_context(cafile=str(ca.ca_file))
    assert _store_size(unchecked) == 0
    assert _store_size(checked) == 1
    assert type(explicit) is ssl.SSLContext and _store_size(explicit) == 1


def test_outside_the_window_the_ssl_module_is_as_it_was(ca, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))
    before = ssl.create_default_context
    with deferred_store():
        pass
    assert ssl.create_default_context is before
    assert "set_default_verify_paths" not in vars(ssl.SSLContext)
    ctx = ssl.create_default_context()
    assert type(ctx) is ssl.SSLContext and _store_size(ctx) == 1
    unchecked = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    unchecked.check_hostname, unchecked.verify_mode = False, ssl.CERT_NONE
    unchecked.set_default_verify_paths()
    assert _store_size(unchecked) == 1


async def test_a_crawl_trusts_the_system_store_through_aiohttps_deferred_context(ca, tmp_path, crawl_args):
    """`crawl` with the default TLS settings: aiohttp's own verified context, made in the window while the
    command's modules were imported, verifies against the store it loads at the first handshake."""
    seeds = tmp_path / "seeds.txt"
    async with SiteServer(DEMO_SITE, ssl_context=ca.server("localhost")) as site:
        seeds.write_text(f"https://localhost:{site.port}/\n")
        args = ("crawl", "--seeds", str(seeds), "--rounds", "1", *crawl_args, "-D", "http.resolve={localhost: 127.0.0.1}")
        untrusted = await run_crawler(*args, "-D", f"crawl_dir={tmp_path / 'untrusted'}")
        assert untrusted.code == 0, untrusted.stderr[-2000:]
        assert site.requests == []  # every handshake failed: nothing reached the server
        trusted = await run_crawler(*args, "-D", f"crawl_dir={tmp_path / 'trusted'}",
                                    env={"SSL_CERT_FILE": str(ca.ca_file)})
    assert trusted.code == 0, trusted.stderr[-2000:]
    paths = {r.path_qs for r in site.requests}
    assert {"/robots.txt", "/"} <= paths and len(paths) > 2  # the seed, then the pages it links to


async def test_a_ca_file_is_read_at_once_and_the_system_store_at_the_first_handshake(ca, tmp_path, monkeypatch):
    """http.tls.ca_file is trusted besides the system store: the file is read (and checked) when the
    client is made, the store when it first connects."""
    (tmp_path / "system").mkdir()
    system = make_ca(tmp_path / "system")
    monkeypatch.setenv("SSL_CERT_FILE", str(system.ca_file))
    ctx = tls.client_context(TlsConfig(ca_file=str(ca.ca_file)))
    assert isinstance(ctx, DeferredTrust)
    assert _store_size(ctx) == 1  # the CA file's certificate only
    async with SiteServer(DEMO_SITE, ssl_context=system.server("localhost")) as site:
        await _handshake(ctx, site.port)
    assert _store_size(ctx) == 2
