"""Name resolution: pins, the positive and negative cache, the cap on lookups in flight, the address policy."""

from __future__ import annotations

import asyncio
import socket

import pytest

from crawler.config import HttpConfig
from crawler.errors import BlockedAddress, DnsError
from crawler.protocols.dns import AddressPolicy, PolicyResolver


class CountingResolver:
    """A stand-in system resolver (no query leaves the machine): knows one name, counts calls and concurrency."""

    def __init__(self) -> None:
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def resolve(self, host, port=0, family=socket.AF_INET):
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            if host.startswith("known"):
                return [{"hostname": host, "host": "93.184.216.34", "port": port, "family": family,
                         "proto": 0, "flags": 0}]
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        finally:
            self.in_flight -= 1

    async def close(self):
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _resolver(**dns) -> tuple[PolicyResolver, CountingResolver, Clock]:
    fake, clock = CountingResolver(), Clock()
    cfg = HttpConfig(dns=dns) if dns else HttpConfig()
    return PolicyResolver(cfg, clock=clock, fallback=fake), fake, clock


class TestCache:
    async def test_answers_are_cached_until_the_ttl(self):
        """A name is looked up once while its answer is fresh, and again after http.dns.cache_ttl."""
        resolver, fake, clock = _resolver(cache_ttl=60)
        for _ in range(3):
            assert (await resolver.resolve("known.example"))[0]["host"] == "93.184.216.34"
        assert fake.calls == 1
        clock.now = 61
        await resolver.resolve("known.example")
        assert fake.calls == 2

    async def test_failures_are_cached_as_well(self):
        """A name that does not resolve costs one query per http.dns.negative_ttl, each answer a DnsError."""
        resolver, fake, clock = _resolver(negative_ttl=30)
        for _ in range(3):
            with pytest.raises(DnsError):
                await resolver.resolve("missing.example")
        assert fake.calls == 1
        clock.now = 31
        with pytest.raises(DnsError):
            await resolver.resolve("missing.example")
        assert fake.calls == 2

    async def test_concurrent_lookups_share_one_query_and_respect_the_cap(self):
        """Lookups of one name share a query; distinct names run at most http.dns.max_lookups at once."""
        resolver, fake, _ = _resolver(max_lookups=3)
        await asyncio.gather(*(resolver.resolve("known.same") for _ in range(10)))
        assert fake.calls == 1
        await asyncio.gather(*(resolver.resolve(f"known{i}.example") for i in range(12)))
        assert fake.max_in_flight == 3


class TestPolicy:
    async def test_private_answers_are_refused(self):
        """A pinned private address is refused by default, even though the name itself looks public."""
        resolver = PolicyResolver(HttpConfig(resolve={"www.example.com": "10.1.2.3"}))
        with pytest.raises(BlockedAddress):
            await resolver.resolve("www.example.com")

    @pytest.mark.parametrize(
        ("address", "allowed"),
        [("93.184.216.34", True), ("127.0.0.1", False), ("10.0.0.1", False), ("169.254.169.254", False),
         ("192.168.1.1", False), ("::1", False), ("fe80::1", False), ("100.64.0.1", False), ("240.0.0.1", False),
         ("192.0.2.1", False), ("10.9.8.7", True), ("127.0.0.5", True)],
    )
    def test_address_policy(self, address, allowed):
        """Public addresses pass; private, loopback, link-local, shared and reserved ones only via the allowlist."""
        policy = AddressPolicy(HttpConfig(private_allowlist=["10.9.0.0/16", "127.0.0.5"]))
        assert policy.allows(address) is allowed
