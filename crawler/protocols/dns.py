"""Name resolution for the fetcher: pinned names, a cache with negative entries, a cap, an address policy.

- ``http.resolve`` pins names to addresses, so tests and benches never send a
  DNS query off the machine; a name pinned to ``''`` fails like an unknown name.
- Answers are cached for ``http.dns.cache_ttl`` and failures for
  ``http.dns.negative_ttl``: a dead host in a fetchlist of thousands of its
  URLs costs one query, not thousands. Concurrent lookups of one name share one
  query, and at most ``http.dns.max_lookups`` queries run at once.
- The address policy runs on every answer, cached or not, and aiohttp asks on
  every new connection: a redirect, or a name whose answer changes, cannot
  smuggle in a private address (DESIGN 5).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import OrderedDict
from collections.abc import Callable

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from crawler.config import HttpConfig
from crawler.errors import BlockedAddress, DnsError

_MAX_CACHED = 100_000


class AddressPolicy:
    """Which addresses may be fetched: public ones, plus ``http.private_allowlist``, or all if allowed."""

    def __init__(self, cfg: HttpConfig) -> None:
        self.allow_private = cfg.allow_private_networks
        self.allowlist = [ipaddress.ip_network(n, strict=False) for n in cfg.private_allowlist]

    def allows(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0].strip("[]"))
        except ValueError:
            return False
        if self.allow_private:
            return True
        if ip.is_global and not ip.is_multicast:
            return True
        return any(ip in net for net in self.allowlist)

    def check_literal(self, host: str) -> None:
        """An IP literal in the URL never reaches the resolver: check it here."""
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return
        if not self.allows(host):
            raise BlockedAddress(f"{host} is a private address (http.allow_private_networks is false)")


class PolicyResolver(AbstractResolver):
    def __init__(self, cfg: HttpConfig, clock: Callable[[], float] = time.monotonic,
                 fallback: AbstractResolver | None = None) -> None:
        self.pinned = {host.lower().rstrip("."): addr for host, addr in cfg.resolve.items()}
        self.policy = AddressPolicy(cfg)
        self.ttl = cfg.dns.cache_ttl
        self.negative_ttl = cfg.dns.negative_ttl
        self.clock = clock
        self.fallback = fallback or aiohttp.ThreadedResolver()
        self._slots = asyncio.Semaphore(cfg.dns.max_lookups)
        self._cache: OrderedDict[tuple[str, int, int], tuple[float, list[ResolveResult] | DnsError]] = OrderedDict()
        self._pending: dict[tuple[str, int, int], asyncio.Future[list[ResolveResult]]] = {}
        self.lookups = 0  # queries actually sent (not answered from pins or cache)

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        results = await self.lookup(host, port, family)
        allowed = [r for r in results if self.policy.allows(r["host"])]
        if not allowed:
            raise BlockedAddress(f"{host} resolves only to private addresses (http.allow_private_networks is false)")
        return allowed

    async def lookup(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        """Every address of ``host``, before the policy: cached, shared, capped."""
        name = host.lower().rstrip(".")
        if name in self.pinned:
            return _pinned(host, self.pinned[name], port)
        key = (name, port, family)
        cached = self._cache.get(key)
        if cached is not None:
            expires, answer = cached
            if expires > self.clock():
                if isinstance(answer, DnsError):
                    raise DnsError(str(answer))
                return answer
            del self._cache[key]
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = asyncio.ensure_future(self._query(key, host))
            pending.add_done_callback(lambda _f: self._pending.pop(key, None))
        return await asyncio.shield(pending)

    async def _query(self, key: tuple[str, int, int], host: str) -> list[ResolveResult]:
        async with self._slots:
            self.lookups += 1
            try:
                results = await self.fallback.resolve(host, key[1], key[2])
            except OSError as exc:
                error = DnsError(f"cannot resolve {host}: {exc.strerror or exc}")
                self._store(key, self.negative_ttl, error)
                raise error from exc
        self._store(key, self.ttl, results)
        return results

    def _store(self, key: tuple[str, int, int], ttl: float, answer: list[ResolveResult] | DnsError) -> None:
        if ttl <= 0:
            return
        self._cache[key] = (self.clock() + ttl, answer)
        while len(self._cache) > _MAX_CACHED:
            self._cache.popitem(last=False)

    async def close(self) -> None:
        await self.fallback.close()


async def address_of(resolver: PolicyResolver, host: str) -> str:
    """The first address ``host`` resolves to (pins, cache and cap alike); ``host`` itself if it resolves to none.

    What ``queue_mode: ip`` queues by and ``count_mode: ip`` counts by, so fetch and generate group alike.
    """
    try:
        results = await resolver.lookup(host)
    except DnsError:
        return host
    return str(results[0]["host"]) if results else host


def _pinned(host: str, address: str, port: int) -> list[ResolveResult]:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise DnsError(f"cannot resolve {host} (http.resolve gives {address!r})") from None
    return [{
        "hostname": host, "host": str(ip), "port": port,
        "family": socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
        "proto": 0, "flags": socket.AI_NUMERICHOST,
    }]
