"""What ``generate.max_per_host`` counts by (``generate.count_mode``): host, registered domain, or IP.

Each mode maps the distinct hosts of the due pages to their counting key; generate
joins that small table onto the pages, so the per-key limit stays one SQL window.
``domain`` uses the public suffix list bundled with ``publicsuffixlist`` (never
fetched over the network): ``a.example.co.uk`` and ``b.example.co.uk`` count as
``example.co.uk``. ``ip`` pins names through ``http.resolve`` first, resolves
the rest once each (a name that does not resolve counts by itself), so hosts
sharing a server share its limit.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from crawler.config import CrawlerConfig
from crawler.urls.domain import is_ip, registered_domain

CountKey = Callable[[list[str], CrawlerConfig], list[str]]


def _by_host(hosts: list[str], cfg: CrawlerConfig) -> list[str]:
    return list(hosts)


def _by_domain(hosts: list[str], cfg: CrawlerConfig) -> list[str]:
    return [registered_domain(h) for h in hosts]


def _resolve(host: str) -> str:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return host
    return str(infos[0][4][0]) if infos else host


def _by_ip(hosts: list[str], cfg: CrawlerConfig) -> list[str]:
    pins = cfg.http.resolve
    keys = {h: (h.strip("[]") if is_ip(h) else pins.get(h)) for h in hosts}
    unknown = [h for h, key in keys.items() if key is None]
    if unknown:
        with ThreadPoolExecutor(max_workers=16) as pool:
            keys.update(zip(unknown, pool.map(_resolve, unknown), strict=True))
    return [str(keys[h]) for h in hosts]


COUNT_KEYS: dict[str, CountKey] = {"host": _by_host, "domain": _by_domain, "ip": _by_ip}


def count_keys(hosts: list[str], cfg: CrawlerConfig) -> list[str]:
    """The counting key of each host, in order, for ``cfg.generate.count_mode``."""
    return COUNT_KEYS[cfg.generate.count_mode](hosts, cfg)
