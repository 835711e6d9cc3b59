"""The urls.* rules the normalizer applies to a finished href: repeated slashes in the path collapsed
(``urls.collapse_slashes``), query and ``;name=value`` path parameters dropped (``urls.drop_params``).

Most URLs need neither, so the rules first look with one cheap C call each and only then take the
URL apart.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable

Rules = Callable[[str, int], str]  # (href, where its path starts) -> href with the urls.* rules applied

_SLASH_RUN = re.compile(r"//+")
_DOUBLE_SLASH = re.compile("//")
_PATH_PARAM = re.compile(r";([^;/=]*)=[^;/]*")  # ';jsessionid=...' inside a path segment
_GLOB = re.compile(r"[*?\[]")


def _trie(words: Iterable[str]) -> str:
    """A regex matching any of ``words`` at a position, as a trie: a failing branch is left at its first
    character (a fifth cheaper than a plain alternation of the 25 default names)."""
    if "" in words:
        return ""  # a shorter word already matched
    groups: dict[str, list[str]] = {}
    for word in sorted(words):
        groups.setdefault(word[0], []).append(word[1:])
    alts = [re.escape(c) + _trie(rest) for c, rest in groups.items()]
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


class ParamPatterns:
    """``urls.drop_params``: parameter names or fnmatch globs, matched case-insensitively."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.exact: set[str] = set()
        globs: list[str] = []
        prefixes: set[str] = set()  # what a name must start with to match any pattern
        for pattern in patterns:
            pattern = pattern.lower()
            if m := _GLOB.search(pattern):
                globs.append(fnmatch.translate(pattern))
                prefixes.add(pattern[: m.start()])
            else:
                self.exact.add(pattern)
                prefixes.add(pattern)
        self.glob = re.compile("|".join(globs)).match if globs else None  # of a lowercased name
        # One search of the lowercased href for a parameter that may match, so that the usual URL, with
        # nothing to drop, costs one C call; a glob starting with a wildcard leaves every URL to check.
        self.candidate = None if "" in prefixes else re.compile("[?&;]" + _trie(prefixes)).search

    def __bool__(self) -> bool:
        return bool(self.exact) or self.glob is not None

    def matches(self, name: str) -> bool:
        name = name.lower()
        return name in self.exact or (self.glob is not None and self.glob(name) is not None)


def make_rules(collapse_slashes: bool, params: ParamPatterns, again: Callable[[str], str]) -> Rules | None:
    """The urls.* rules as one step on a finished href; ``again`` normalizes a changed path once more."""
    if not collapse_slashes and not params:
        return None
    drop = bool(params)
    drops, candidate = params.matches, params.candidate
    double_slash = _DOUBLE_SLASH.search  # a compiled search is half the cost of str.find with a start

    def rules(href: str, path: int) -> str:
        # Most URLs need none of this: each test below is one cheap C call on the whole href.
        if drop and ("?" in href or ";" in href):
            low = href.lower()  # a normalized href is ASCII: lowercasing keeps every position
            if candidate is None or candidate(low, path):
                query = href.find("?", path)
                stop = len(href) if query < 0 else query
                if href.find(";", path, stop) >= 0:
                    segment = href[path:stop]
                    cut = _PATH_PARAM.sub(lambda m: "" if drops(m[1]) else m[0], segment)
                    if cut != segment:
                        # What is left may be a dot segment ('/.;jsessionid=1/'): the parser resolves it,
                        # and drops the query's parameters on the way.
                        return again(href[:path] + cut + href[stop:])
                if query >= 0:
                    params = href[query + 1 :].split("&")
                    kept = [p for p in params if not drops(p.partition("=")[0])]
                    if len(kept) != len(params):
                        rest = "&".join(kept)
                        href = href[:query] + ("?" + rest if rest.strip("&") else "")
        if collapse_slashes and (m := double_slash(href, path)) is not None:
            stop = href.find("?", path)
            if stop < 0:
                stop = len(href)
            if m.start() < stop:
                # ada has resolved every dot segment already, and dropping empty segments makes none.
                href = href[:path] + _SLASH_RUN.sub("/", href[path:stop]) + href[stop:]
        return href

    return rules
