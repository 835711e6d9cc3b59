"""URL normalization: WHATWG parsing (ada-url) plus the RFC 3986 clean-ups a crawler needs.

The result of ``normalize`` is the one spelling of a URL the crawler stores and
compares: http(s) only, lowercase scheme and host, punycode, no default port,
no fragment, no bare ``?``, unreserved escapes decoded, other escapes uppercase,
every character outside RFC 3986 percent-encoded.
"""

import re
import string
from functools import lru_cache

# The C functions directly, bound to globals: the public wrappers (join_url, URL)
# add an ffi.gc object and attribute lookups per call; join_url alone costs ~80%
# of a whole normalize() (bench/bench_normalize.py).
from ada_url import check_url
from ada_url._ada_wrapper import ffi, lib

_ada_parse, _ada_join = lib.ada_parse, lib.ada_parse_with_base
_ada_href, _ada_free, _unpack = lib.ada_get_href, lib.ada_free, ffi.unpack

MAX_LENGTH = 8192
_SCHEMES = ("http", "https")
_PREFIXES = ("http://", "https://")  # how ada always writes these two schemes

# WHATWG strips C0 controls and space; str.isspace() adds NBSP & co., which
# only ever reach an href by copy-and-paste.
_STRIP = "".join(c for c in map(chr, range(0x3001)) if c <= " " or c.isspace())
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# Escapes, stray '%', and what WHATWG leaves raw although RFC 3986 forbids it.
_FIX = re.compile(r'%(?:[0-9A-Fa-f]{2})?|[\[\\\]^`{|}"<> ]')
_NEEDS_FIX = re.compile(r'[%\[\\\]^`{|}"<> ]')  # a plain class: 3x faster to search than _FIX
_TRAILING_DOTS = re.compile(r"\.+(:\d*)?$")
_AUTHORITY = re.compile(r"(?:[^/\\?#]*@)?(\[[^\]/\\?#]*\]?|[^:/\\?#]*)(?::([^/\\?#]*))?")


class InvalidUrl(ValueError):
    """str(exc) is a short human reason, e.g. 'unsupported scheme ftp', 'no host', 'invalid port'."""


def _fix_table() -> dict[str, str]:
    unreserved = set(string.ascii_letters + string.digits + "-._~")
    table = {"%": "%25", **{c: f"%{ord(c):02X}" for c in '[\\]^`{|}"<> '}}
    for hx in (a + b for a in string.hexdigits for b in string.hexdigits):
        c = chr(int(hx, 16))
        table["%" + hx] = c if c in unreserved else "%" + hx.upper()
    return table


_FIXES = _fix_table()


def _fix_one(m: re.Match[str]) -> str:
    return _FIXES[m[0]]


def _parse(s: str, base: str | None) -> str:
    """WHATWG-parse s (against base); the href of a valid http(s) URL, else InvalidUrl."""
    try:
        b = s.encode()
        u = _ada_parse(b, len(b)) if base is None else _ada_join(b, len(b), bb := base.encode(), len(bb))
    except UnicodeEncodeError:  # lone surrogates
        raise InvalidUrl("invalid characters") from None
    try:
        h = _ada_href(u)  # empty (NULL data) for an invalid URL
        href = _unpack(h.data, h.length).decode() if h.length else ""
    finally:
        _ada_free(u)
    if not href.startswith(_PREFIXES):
        if not href:
            raise InvalidUrl(_reason(s, base))
        raise InvalidUrl("unsupported scheme " + href[: href.index(":")][:32])
    return href


def _reason(s: str, base: str | None) -> str:
    """Why ada refused s; only called on failure, so it may be slow."""
    if base is not None and not check_url(base):
        return "invalid base url"
    m = _SCHEME.match(s)
    rest = s[m.end() :] if m else s
    if m or not rest[:2].strip("/\\"):  # s names its own host
        host, port = _AUTHORITY.match(rest.lstrip("/\\")).groups()
        if not host:
            return "no host"
        if port and not (port.isascii() and port.isdigit() and int(port) < 65536):
            return "invalid port"
        return "invalid host"
    if base is not None:  # a relative reference only fails on a base that cannot be one
        try:
            _parse(base, None)
        except InvalidUrl as e:
            return f"invalid base url ({e})"
    return "invalid url"


def _finish(href: str) -> str:
    """Apply the steps WHATWG does not to an ada href of an http(s) URL."""
    if "#" in href:
        href = href[: href.index("#")]
    if href[-1] == "?" and href.index("?") == len(href) - 1:
        href = href[:-1]
    start = 8 if href[4] == "s" else 7  # ada writes exactly 'http://' or 'https://'
    end = href.index("/", start)  # userinfo and host never hold a raw '/'
    auth = href[start:end]
    if auth[-1] == "." or ".:" in auth or "@" in auth:
        userinfo, at, hostport = auth.rpartition("@")
        host = _TRAILING_DOTS.sub(r"\1", hostport)
        if host != hostport:
            if host[:1] in ("", ":"):
                raise InvalidUrl("no host")
            # Without the dot the host may read as an IPv4 number ('0x7f.1.'): parse again.
            return _finish(_parse(href[:start] + userinfo + at + host + href[end:], None))
        if "%" in userinfo:
            href = href[:start] + _FIX.sub(_fix_one, userinfo) + at + hostport + href[end:]
            end = href.index("/", start)
    if _NEEDS_FIX.search(href, end):
        href = href[:end] + _FIX.sub(_fix_one, href[end:])
    if len(href) > MAX_LENGTH:
        raise InvalidUrl("url too long")
    return href


@lru_cache(maxsize=256)
def _base_parts(base: str) -> tuple[str, str, str, str, str] | None:
    """(scheme, origin, directory, url without query, url) of a normalized http(s) base, else None."""
    # Resolving by concatenating these prefixes, then one plain parse, is about half
    # the cost of ada's parse-with-base, which parses the base again for every link.
    try:
        url = normalize(base)
    except InvalidUrl:
        return None
    q = url.find("?")
    noquery = url if q < 0 else url[:q]
    scheme = url[: url.index(":")]
    origin = noquery[: noquery.index("/", len(scheme) + 3)]
    return scheme, origin, noquery[: noquery.rindex("/") + 1], noquery, url


def normalize(url: str, base: str | None = None) -> str:
    """The normalized absolute form of url (resolved against base if given); raises InvalidUrl."""
    s = url.strip(_STRIP)
    if len(s) > MAX_LENGTH:
        raise InvalidUrl("url too long")
    if "\t" in s or "\n" in s or "\r" in s:
        s = s.replace("\t", "").replace("\n", "").replace("\r", "")
    first = s[:1]
    scheme = None
    if first.isalpha():
        if s.startswith(_PREFIXES):
            scheme = "https" if s[4] == "s" else "http"
        elif m := _SCHEME.match(s):
            # Whatever the base, a scheme-looking prefix is the result's scheme: reject early.
            scheme = m[0][:-1].lower()
            if scheme not in _SCHEMES:
                raise InvalidUrl("unsupported scheme " + scheme[:32])
    if not base:
        if not s:
            raise InvalidUrl("empty url")
        if scheme is None:
            raise InvalidUrl("no scheme")
        return _finish(_parse(s, None))
    parts = _base_parts(base)
    if parts is None:
        return _finish(_parse(s, base))  # fails, with the base's reason, unless s is absolute
    bscheme, origin, directory, noquery, full = parts
    # The WHATWG relative states for a special base, as string concatenation.
    if not s or first == "#":
        return full
    if scheme is not None:
        tail = s[len(scheme) + 1 : len(scheme) + 3]
        if scheme == bscheme and not (len(tail) == 2 and not tail.strip("/\\")):
            return _finish(_parse(s, base))  # 'http:x' on an http page is relative: let ada do it
        return _finish(_parse(s, None))
    if first in "/\\":
        s = bscheme + ":" + s if s[1:2] in ("/", "\\") else origin + s
    elif first == "?":
        s = noquery + s
    else:
        s = directory + s
    return _finish(_parse(s, None))


def host_of(url: str) -> str:
    """Host of a normalize() result (lowercase, no port, IPv6 in brackets); '' for file-like urls."""
    start = url.find("://") + 3
    if start < 3:
        return ""
    end = url.find("/", start)
    if end < 0:
        end = len(url)
    at = url.rfind("@", start, end)
    if at >= 0:
        start = at + 1
    if url.startswith("[", start):
        return url[start : url.find("]", start, end) + 1]
    colon = url.find(":", start, end)
    return url[start : colon if colon >= 0 else end]
