"""Indexing directives: ``<meta name=robots>`` contents and ``X-Robots-Tag`` headers.

Both say ``noindex`` (keep the page out of the index), ``nofollow`` (queue none of
its links) or ``none`` (both), either for every robot or for one agent by name.
Directives add up: the most restrictive one that applies to us wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

# X-Robots-Tag directives that take a value after a colon, so "name:" before them is not an agent.
_VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})


class Robots(NamedTuple):
    noindex: bool = False
    nofollow: bool = False

    def __or__(self, other: tuple) -> Robots:
        return Robots(self.noindex or other[0], self.nofollow or other[1])


def robot_names(agent_name: str) -> frozenset[str]:
    """The meta/header names that address us: ``robots`` and our agent token, lowercase."""
    names = {"robots"}
    if agent_name.strip():
        names.add(agent_name.strip().lower())
    return frozenset(names)


def parse_directives(content: str) -> Robots:
    """Directives of one meta robots ``content`` (comma or space separated, any case)."""
    noindex = nofollow = False
    for directive in content.lower().replace(",", " ").split():
        if directive in ("noindex", "none"):
            noindex = True
        if directive in ("nofollow", "none"):
            nofollow = True
    return Robots(noindex, nofollow)


def x_robots_tag(values: Iterable[str], names: frozenset[str]) -> Robots:
    """Directives of X-Robots-Tag header values that apply to an agent known by ``names``.

    A value may name an agent first (``mybot: noindex, nofollow``); the directives
    after it are that agent's until another name follows. Unnamed ones apply to all.
    """
    result = Robots()
    for value in values:
        applies = True
        for piece in value.split(","):
            head, colon, rest = piece.partition(":")
            name = head.strip().lower()
            if colon and name and " " not in name and name not in _VALUED:
                applies = name in names or name == "*"
                piece = rest
            if applies:
                result = result | parse_directives(piece)
    return result


def header_values(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None, name: str) -> list[str]:
    """Every value of header ``name`` (case-insensitive) in a mapping or a list of pairs."""
    if not headers:
        return []
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    lower = name.lower()
    return [v for k, v in pairs if k.lower() == lower]
