"""URL normalization: WHATWG parsing (ada-url) plus the RFC 3986 clean-ups a crawler needs.

The result of a normalizer is the one spelling of a URL the crawler stores and
compares: lowercase scheme and host, punycode, no default port, no fragment, no
bare ``?``, unreserved escapes decoded, other escapes uppercase, every character
outside RFC 3986 percent-encoded.

``Normalizer.from_config(cfg)`` is the one every command uses: it accepts the
schemes of ``urls.schemes`` that an enabled protocol plugin serves, collapses
repeated slashes in the path (``urls.collapse_slashes``) and drops the query and
``;name=value`` path parameters named by ``urls.drop_params`` (``rules.py``). The module-level
``normalize`` is the normalizer without options (http and https, nothing
collapsed or dropped), for code that holds no config.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

# The C functions directly, bound to globals: the public wrappers (join_url, URL)
# add an ffi.gc object and attribute lookups per call; join_url alone costs ~80%
# of a whole normalize() (bench/bench_normalize.py).
from ada_url import check_url
from ada_url._ada_wrapper import ffi, lib

from crawler.errors import InvalidUrl
from crawler.urls.rules import ParamPatterns, Rules, make_rules

if TYPE_CHECKING:
    from crawler.config import CrawlerConfig

_ada_parse, _ada_join = lib.ada_parse, lib.ada_parse_with_base
_ada_href, _ada_free, _unpack = lib.ada_get_href, lib.ada_free, ffi.unpack

MAX_LENGTH = 8192
_SCHEMES = ("http", "https")
_PREFIXES = ("http://", "https://")  # how ada always writes these two schemes
_NO_SCHEMES: frozenset[str] = frozenset()
_NO_HINTS: dict[str, str] = {}

# WHATWG strips C0 controls and space; str.isspace() adds NBSP & co., which
# only ever reach an href by copy-and-paste.
_STRIP = "".join(c for c in map(chr, range(0x3001)) if c <= " " or c.isspace())
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# Escapes, stray '%', and what WHATWG leaves raw although RFC 3986 forbids it.
_FIX = re.compile(r'%(?:[0-9A-Fa-f]{2})?|[\[\\\]^`{|}"<> ]')
_NEEDS_FIX = re.compile(r'[%\[\\\]^`{|}"<> ]')  # a plain class: 3x faster to search than _FIX
_TRAILING_DOTS = re.compile(r"\.+(:\d*)?$")
_AUTHORITY = re.compile(r"(?:[^/\\?#]*@)?(\[[^\]/\\?#]*\]?|[^:/\\?#]*)(?::([^/\\?#]*))?")
_AUTHORITY_END = re.compile(r"[/?]")


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


def _parse(s: str, base: str | None, prefixes: tuple[str, ...] = _PREFIXES,
           other: frozenset[str] = _NO_SCHEMES, hints: Mapping[str, str] = _NO_HINTS) -> str:
    """WHATWG-parse s (against base); the href of a valid URL of an accepted scheme, else InvalidUrl.

    ``prefixes``: the http(s) schemes accepted, as ada writes them; ``other``: the other schemes accepted;
    ``hints``: scheme -> why it is refused, added to the reason."""
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
    if not href.startswith(prefixes):
        if not href:
            raise InvalidUrl(_reason(s, base))
        scheme = href[: href.index(":")]
        if scheme not in other:
            raise InvalidUrl("unsupported scheme " + scheme[:32] + hints.get(scheme, ""))
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


def _finish(href: str, rules: Rules | None = None) -> str:
    """Apply the steps WHATWG does not to an ada href of an http(s) URL, then ``rules``."""
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
            return _finish(_parse(href[:start] + userinfo + at + host + href[end:], None), rules)
        if "%" in userinfo:
            href = href[:start] + _FIX.sub(_fix_one, userinfo) + at + hostport + href[end:]
            end = href.index("/", start)
    if _NEEDS_FIX.search(href, end):
        href = href[:end] + _FIX.sub(_fix_one, href[end:])
    if len(href) > MAX_LENGTH:
        raise InvalidUrl("url too long")
    return href if rules is None else rules(href, end)


def _finish_other(href: str, rules: Rules | None = None) -> str:
    """The same clean-ups for an ada href of another accepted scheme (file:): its host is ada's already."""
    if "#" in href:
        href = href[: href.index("#")]
    if href[-1] == "?" and href.index("?") == len(href) - 1:
        href = href[:-1]
    colon = href.index(":")
    if href.startswith("//", colon + 1):
        m = _AUTHORITY_END.search(href, colon + 3)
        end = m.start() if m else len(href)
    else:  # an opaque path: nothing hierarchical to collapse
        end = colon + 1
    if _NEEDS_FIX.search(href, end):
        href = href[:end] + _FIX.sub(_fix_one, href[end:])
    if len(href) > MAX_LENGTH:
        raise InvalidUrl("url too long")
    return href if rules is None else rules(href, end)


def _finish_any(href: str, rules: Rules | None = None) -> str:
    """_finish for an http(s) href, _finish_other for the rest."""
    return _finish(href, rules) if href.startswith(_PREFIXES) else _finish_other(href, rules)


# (scheme, origin, directory, url without query, url) of a normalized base: Normalizer.base_parts.
BaseParts = tuple[str, str | None, str, str, str]


class Normalizer:
    """The normalizer with its options; ``normalize(url, base=None)`` raises InvalidUrl, ``resolve`` gives None
    instead (a parser keeps what many pages share itself: crawler/parsers/linkcache.py).

    ``schemes``: the schemes accepted; ``hints``: scheme -> why it is not accepted, for the reason;
    ``collapse_slashes``: '//' runs in the path become '/'; ``drop_params``: names or globs of query
    (and ``;name=value`` path) parameters removed, matched case-insensitively.
    Pickles by its settings, so a parser holding one can go to a worker process.
    """

    def __init__(self, schemes: Iterable[str] = _SCHEMES, *, collapse_slashes: bool = False,
                 drop_params: Iterable[str] = (), hints: Mapping[str, str] | None = None) -> None:
        self.schemes = tuple(sorted({s.lower() for s in schemes}))
        self.collapse_slashes = collapse_slashes
        self.drop_params = tuple(drop_params)
        self.hints = dict(hints or {})
        self.normalize, self.base_parts = self._build()

    @classmethod
    def from_config(cls, cfg: CrawlerConfig) -> Normalizer:
        """The crawler's normalizer: ``urls.*`` rules, the schemes of ``urls.schemes`` an enabled plugin serves."""
        from crawler.protocols.base import served_schemes  # the plugin registry, only when a config asks

        served = served_schemes(cfg)
        listed = {s.lower() for s in cfg.urls.schemes}
        # The reason names the setting that would let a refused scheme through.
        hints = {s: f" ({why or 'not in urls.schemes'})" for s, why in served.items() if s in listed and why
                 or s not in listed and not why}
        hints.update({s: " (no protocol plugin serves it)" for s in listed if s not in served})
        urls = cfg.urls
        return cls((s for s in listed if served.get(s) == ""), collapse_slashes=urls.collapse_slashes,
                   drop_params=urls.drop_params, hints=hints)

    def resolve(self, raw: str | None, base: str | None = None) -> str | None:
        """normalize(raw, base), or None when raw is None or rejected."""
        if raw is None:
            return None
        try:
            return self.normalize(raw, base)
        except ValueError:  # InvalidUrl, and anything else one bad href may raise
            return None

    def __reduce__(self) -> tuple[Callable[..., Normalizer], tuple[object, ...]]:
        return _restore, (self.schemes, self.collapse_slashes, self.drop_params, self.hints)

    def __repr__(self) -> str:
        return (f"Normalizer(schemes={self.schemes}, collapse_slashes={self.collapse_slashes}, "
                f"drop_params={self.drop_params})")

    def _build(self) -> tuple[Callable[[str, str | None], str], Callable[[str], BaseParts | None]]:
        schemes = frozenset(self.schemes)
        prefixes = tuple(p for p in _PREFIXES if p[:-3] in schemes)
        other = schemes - set(_SCHEMES)
        hints = self.hints
        http_only = not other and len(prefixes) == 2  # the usual case: no dispatch on the scheme
        rules = make_rules(self.collapse_slashes, ParamPatterns(self.drop_params), lambda href: normalize(href))
        # Called with every argument rather than through a wrapper: a Python frame costs ~5% of a normalize().
        fin = _finish if http_only else _finish_any

        @lru_cache(maxsize=256)
        def base_parts(base: str) -> BaseParts | None:
            """(scheme, origin, directory, url without query, url) of a normalized http(s) base; origin None
            for a base of another scheme; None when the base does not normalize. The HTML parser's tables of
            shared links are keyed by its origin and directory (crawler/parsers/linkcache.py)."""
            # Resolving by concatenating these prefixes, then one plain parse, is about half
            # the cost of ada's parse-with-base, which parses the base again for every link.
            try:
                url = normalize(base)
            except InvalidUrl:
                return None
            scheme = url[: url.index(":")]
            if not url.startswith(_PREFIXES):  # file: has WHATWG quirks of its own: ada resolves against it
                return scheme, None, "", "", url
            q = url.find("?")
            noquery = url if q < 0 else url[:q]
            origin = noquery[: noquery.index("/", len(scheme) + 3)]
            return scheme, origin, noquery[: noquery.rindex("/") + 1], noquery, url

        def normalize(url: str, base: str | None = None) -> str:
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
                    if scheme not in schemes:
                        raise InvalidUrl("unsupported scheme " + scheme[:32] + hints.get(scheme, ""))
                    if scheme == "file" and base and base.lstrip(_STRIP)[:5].lower() != "file:":
                        # As browsers do: a web page (or its redirect) never leads to the local disk.
                        raise InvalidUrl("file: url from a non-file page")
            if not base:
                if not s:
                    raise InvalidUrl("empty url")
                if scheme is None:
                    raise InvalidUrl("no scheme")
                return fin(_parse(s, None, prefixes, other, hints), rules)
            parts = base_parts(base)
            if parts is None:
                # Fails, with the base's reason, unless s is absolute.
                return fin(_parse(s, base, prefixes, other, hints), rules)
            bscheme, origin, directory, noquery, full = parts
            # The WHATWG relative states for a special base, as string concatenation.
            if not s or first == "#":
                return full
            if origin is None:
                return fin(_parse(s, full, prefixes, other, hints), rules)
            if scheme is not None:
                tail = s[len(scheme) + 1 : len(scheme) + 3]
                if scheme == bscheme and not (len(tail) == 2 and not tail.strip("/\\")):
                    # 'http:x' on an http page is relative: let ada do it.
                    return fin(_parse(s, full, prefixes, other, hints), rules)
                return fin(_parse(s, None, prefixes, other, hints), rules)
            if first in "/\\":
                s = bscheme + ":" + s if s[1:2] in ("/", "\\") else origin + s
            elif first == "?":
                s = noquery + s
            else:
                s = directory + s
            return fin(_parse(s, None, prefixes, other, hints), rules)

        normalize.__doc__ = "The normalized absolute form of url (resolved against base if given); raises InvalidUrl."
        return normalize, base_parts


def _restore(schemes: tuple[str, ...], collapse_slashes: bool, drop_params: tuple[str, ...],
             hints: dict[str, str]) -> Normalizer:
    return Normalizer(schemes, collapse_slashes=collapse_slashes, drop_params=drop_params, hints=hints)


PLAIN = Normalizer()
normalize = PLAIN.normalize


# host_of's rule as a regular expression (its first group), for the jobs' SQL (``jobs/sql.py``'s host_sql):
# after "scheme://" and any "userinfo@", up to ":" or "/" (IPv6 literals keep brackets).
HOST_PATTERN = r"^[^:/?#]+://(?:[^/]*@)?(\[[^\]/]*\]|[^:/]*)"


def host_of(url: str) -> str:
    """Host of a normalize() result (lowercase, no port, IPv6 in brackets); '' for file-like urls.

    The jobs compute the same in SQL with HOST_PATTERN (tests/jobs/test_host_sql.py holds them equal).
    """
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
