"""The address policy itself, form by form: no connection is attempted, only the verdict is asked."""

from __future__ import annotations

import pytest

from crawler.config import load_config
from crawler.errors import BlockedAddress
from crawler.protocols.dns import AddressPolicy, PolicyResolver


def _policy(*overrides: str) -> AddressPolicy:
    return AddressPolicy(load_config(None, list(overrides)).http)


REFUSED = [
    # plain private, loopback, link-local, reserved
    ("127.0.0.1", "loopback"),
    ("10.1.2.3", "private"),
    ("192.168.0.1", "private"),
    ("172.16.0.1", "private"),
    ("169.254.169.254", "link-local (cloud metadata)"),
    ("100.64.0.1", "shared address space"),
    ("0.0.0.0", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("::1", "IPv6 loopback"),
    ("::", "IPv6 unspecified"),
    ("fe80::1", "IPv6 link-local"),
    ("fc00::1", "unique local"),
    ("ff02::1", "IPv6 multicast"),
    # IPv6 forms that carry a private IPv4
    ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
    ("::ffff:10.0.0.1", "IPv4-mapped private"),
    ("::ffff:169.254.169.254", "IPv4-mapped metadata"),
    ("::127.0.0.1", "IPv4-compatible loopback"),
    ("::10.0.0.1", "IPv4-compatible private"),
    ("64:ff9b::7f00:1", "NAT64 of 127.0.0.1"),
    ("64:ff9b::a00:1", "NAT64 of 10.0.0.1"),
    ("64:ff9b::a9fe:a9fe", "NAT64 of 169.254.169.254"),
    ("64:ff9b::c0a8:1", "NAT64 of 192.168.0.1"),
    ("64:ff9b:1::a00:1", "local-use NAT64 prefix"),
    ("64:ff9b:1:0:808:808::", "local-use NAT64 prefix, public IPv4 inside"),
    ("2002:a00:1::", "6to4 of 10.0.0.1"),
    ("2002:7f00:1::1", "6to4 of 127.0.0.1"),
    ("2002:c0a8:101::1", "6to4 of 192.168.1.1"),
    ("2002:a9fe:a9fe::1", "6to4 of 169.254.169.254"),
    ("2001:0:a00:1::1", "Teredo, server 10.0.0.1"),
    ("2001:0:808:808:0:0:f5ff:fffe", "Teredo, public server, client 10.0.0.1 (obfuscated)"),
    ("2001:0:808:808:0:0:80ff:fffe", "Teredo, public server, client 127.0.0.1 (obfuscated)"),
    ("2001:0:808:808:8000:0:f7f7:f7f7", "Teredo, public server and client"),
    ("[64:ff9b::7f00:1]", "bracketed literal"),
    ("fe80::1%eth0", "scoped link-local"),
    ("not an address", "garbage"),
]

ALLOWED = [
    ("8.8.8.8", "public IPv4"),
    ("2606:4700::1111", "public IPv6"),
    ("::ffff:8.8.8.8", "IPv4-mapped public"),
    ("::8.8.8.8", "IPv4-compatible public"),
    ("64:ff9b::808:808", "NAT64 of 8.8.8.8"),
    ("2002:808:808::1", "6to4 of 8.8.8.8"),
]


@pytest.mark.parametrize(("address", "form"), REFUSED)
def test_refused_by_default(address, form):
    assert not _policy().allows(address), form


@pytest.mark.parametrize(("address", "form"), ALLOWED)
def test_public_forms_allowed(address, form):
    assert _policy().allows(address), form


@pytest.mark.parametrize(("address", "form"), [r for r in REFUSED if r[1] != "garbage"])
def test_every_form_allowed_when_private_networks_are(address, form):
    assert _policy("http.allow_private_networks=true").allows(address), form


@pytest.mark.parametrize(("allowlist", "address", "allowed"), [
    ("[10.0.0.0/8]", "64:ff9b::a00:1", True),       # the embedded IPv4 is allowlisted
    ("[10.0.0.0/8]", "2002:a00:1::", True),
    ("[10.0.0.0/8]", "::ffff:10.0.0.1", True),
    ("[10.0.0.0/8]", "64:ff9b::7f00:1", False),     # 127.0.0.1 is not
    ("['64:ff9b::/96']", "64:ff9b::7f00:1", True),  # the IPv6 form itself is allowlisted
    ("[10.0.0.0/8]", "2001:0:808:808:0:0:f5ff:fffe", False),  # Teredo's own prefix still is not global
])
def test_allowlist_covers_the_embedded_or_the_whole_form(allowlist, address, allowed):
    assert _policy(f"http.private_allowlist={allowlist}").allows(address) is allowed


@pytest.mark.parametrize("host", ["[64:ff9b::7f00:1]", "[::ffff:127.0.0.1]", "[2002:a00:1::]", "127.0.0.1"])
def test_url_literals_are_refused_before_any_connection(host):
    with pytest.raises(BlockedAddress, match="private address"):
        _policy().check_literal(host)


@pytest.mark.parametrize("address", ["64:ff9b::7f00:1", "2002:a00:1::", "::ffff:169.254.169.254"])
async def test_a_name_answering_an_embedded_form_is_refused_by_the_resolver(address):
    """The policy runs on resolved answers too (here a pin; nothing is sent anywhere)."""
    cfg = load_config(None, [f"http.resolve={{site.test: '{address}'}}"]).http
    resolver = PolicyResolver(cfg)
    try:
        with pytest.raises(BlockedAddress, match="private addresses"):
            await resolver.resolve("site.test", 443)
    finally:
        await resolver.close()
