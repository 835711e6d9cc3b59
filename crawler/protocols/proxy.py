"""Which requests go through a proxy (the SOCKS connector is crawler/protocols/socks.py).

- ``http.proxy`` serves both schemes: http:// and https:// proxies get plain requests for http
  targets and CONNECT tunnels for https ones (aiohttp); socks5:// and socks5h:// go through
  aiohttp-socks. ``socks5`` resolves names here (pins and the address guard see the very address the
  proxy is asked to reach); ``socks5h`` hands the proxy the name, as curl does.
- ``http.trust_env`` reads HTTP_PROXY / HTTPS_PROXY / NO_PROXY only when asked (and only when
  ``http.proxy`` is empty): a crawl never changes route because of a variable it did not ask for.
- ``http.proxy_bypass`` and NO_PROXY: ``example.com`` covers its subdomains (a leading dot is the
  same), an address or network matches literal hosts and, when networks are listed, the addresses
  a name resolves to; ``*`` bypasses everything.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from yarl import URL

from crawler.config import HttpConfig, check_bypass_entry, check_proxy_url
from crawler.errors import ConfigError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class ProxyRoutes:
    by_scheme: dict[str, URL] = field(default_factory=dict)  # target scheme -> proxy
    names: tuple[str, ...] = ()
    networks: tuple[Network, ...] = ()
    everything: bool = False

    @classmethod
    def from_config(cls, cfg: HttpConfig, environ: Mapping[str, str] | None = None) -> ProxyRoutes:
        bypass = list(cfg.proxy_bypass)
        by_scheme: dict[str, URL] = {}
        if cfg.proxy:
            by_scheme = {"http": URL(cfg.proxy), "https": URL(cfg.proxy)}
        elif cfg.trust_env:
            env = _environment(os.environ if environ is None else environ)
            for scheme in ("http", "https"):
                if env.get(scheme):
                    by_scheme[scheme] = URL(_env_value(f"{scheme.upper()}_PROXY", env[scheme], check_proxy_url))
            bypass += [_env_value("NO_PROXY", _without_port(e), check_bypass_entry)
                       for e in (x.strip() for x in env.get("no", "").split(",")) if e]
        names, networks, everything = [], [], False
        for entry in bypass:
            if entry == "*":
                everything = True
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                names.append(entry.lower().strip(".").rstrip("."))
        return cls(by_scheme, tuple(names), tuple(networks), everything)

    @property
    def proxy_hosts(self) -> frozenset[str]:
        return frozenset(u.host for u in self.by_scheme.values() if u.host)

    def bypasses(self, host: str, addresses: list[str] | None = None) -> bool:
        if self.everything:
            return True
        host = host.lower().rstrip(".")
        if any(host == n or host.endswith("." + n) for n in self.names):
            return True
        if not self.networks:
            return False
        candidates = [host] if _is_ip(host) else (addresses or [])
        for candidate in candidates:
            ip = ipaddress.ip_address(candidate.split("%", 1)[0])
            if any(ip in net for net in self.networks):
                return True
        return False


def _environment(environ: Mapping[str, str]) -> dict[str, str]:
    # curl's and urllib's reading: the lowercase spelling wins over the uppercase one.
    out = {}
    for key in ("http", "https", "no"):
        value = environ.get(f"{key}_proxy") or environ.get(f"{key.upper()}_PROXY")
        if value:
            out[key] = value
    return out


def _without_port(entry: str) -> str:
    # NO_PROXY may say host:port or [v6]:port; the port does not matter to where a host is.
    if entry.startswith("["):
        return entry[1:].split("]", 1)[0]
    if entry.count(":") == 1:
        return entry.split(":", 1)[0]
    return entry


def _env_value(name: str, value: str, check: Any) -> str:
    try:
        return check(value)
    except ValueError as exc:
        raise ConfigError(f"config error: {name} = {value!r} (read because http.trust_env is true): {exc}") from None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True
