"""Registered domains and IP literals, shared by generate's count modes and the fetcher's queue modes.

The public suffix list is the one ``publicsuffixlist`` ships, so nothing is
downloaded at run time: ``a.example.co.uk`` and ``b.example.co.uk`` both belong
to ``example.co.uk``.
"""

from __future__ import annotations

import ipaddress
from functools import cache
from typing import Any


@cache
def _suffix_list() -> Any:
    # Loading the bundled list takes ~50 ms: once per process.
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def registered_domain(host: str) -> str:
    """The registered domain of ``host`` (IP literals and bare suffixes stay as they are)."""
    if is_ip(host):
        return host
    return _suffix_list().privatesuffix(host.lower()) or host
