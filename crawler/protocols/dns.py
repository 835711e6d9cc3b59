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


# Ranges IANA marks not globally reachable that Python 3.11's is_global still calls global.
_NOT_GLOBAL = tuple(ipaddress.ip_network(n) for n in ("64:ff9b:1::/48", "5f00::/16", "3fff::/20"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[list[ipaddress.IPv4Address], bool]:
    """The IPv4 addresses an IPv6 address carries, and whether it stands for them alone.

    IPv4-mapped, IPv4-compatible and NAT64 (64:ff9b::/96) addresses are reached as their IPv4 address
    (a translator or the dual stack does it), so that address decides; 6to4 and Teredo are IPv6 hosts
    tunnelled through IPv4 relays, so both the IPv6 address and each IPv4 one must pass. Teredo carries
    the server and the client (stored XOR-ed, which ipaddress undoes): both are checked.
    """
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped], True
    if ip in _NAT64 or (ip in _COMPATIBLE and int(ip) > 1):  # :: and ::1 are themselves, not IPv4
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)], True
    if ip.sixtofour is not None:
        return [ip.sixtofour], False
    if ip.teredo is not None:
        return list(ip.teredo), False
    return [], False


class AddressPolicy:
    """Which addresses may be fetched: public ones, plus ``http.private_allowlist``, or all if allowed.

    An IPv6 address that embeds an IPv4 one (NAT64, 6to4, Teredo, IPv4-mapped or -compatible) passes
    only if that IPv4 address would: ``64:ff9b::7f00:1`` is 127.0.0.1 reached through a translator.
    """

    def __init__(self, cfg: HttpConfig) -> None:
        self.allow_private = cfg.allow_private_networks
        self.allowlist = [ipaddress.ip_network(n, strict=False) for n in cfg.private_allowlist]

    def allows(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0].strip("[]"))
        except ValueError:
            return False
        if self.allow_private or any(ip in net for net in self.allowlist):
            return True
        if ip.version == 6:
            carried, alone = embedded_ipv4(ip)
            if carried:
                if not all(self._allows(v4) for v4 in carried):
                    return False
                if alone:
                    return True
        return self._allows(ip)

    def _allows(self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        if any(ip in net for net in self.allowlist):
            return True
        return ip.is_global and not ip.is_multicast and not (ip.version == 6 and any(ip in n for n in _NOT_GLOBAL))

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
                 fallback: AbstractResolver | None = None, exempt: frozenset[str] = frozenset()) -> None:
        self.pinned = {host.lower().rstrip("."): addr for host, addr in cfg.resolve.items()}
        # The configured proxies' names: an egress proxy usually lives on a private network, and the user
        # named it. (Targets with these names are checked in HttpProtocol, not here.)
        self.exempt = frozenset(h.lower().rstrip(".") for h in exempt)
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
        if self.exempt and host.lower().rstrip(".") in self.exempt:
            return results
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
