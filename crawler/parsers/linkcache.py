"""A parser's memory of hrefs that resolve the same on many pages: one table per base prefix, bounded.

An href that is a path from the root ('/a', '//cdn/x') or absolute resolves the same on every page of
an origin, one relative to the page's folder ('os.html#x', '../index.html') the same on every page of
that folder. Pages of a site repeat them by the hundred (navigation, indexes, "see also"), so the
parser keeps each one's target in the table of the prefix it depends on: a hit is then a dict lookup
keyed by the raw href, where an LRU keyed by (href, base) took a classification of the href, a tuple,
its hash and a call (docs/benchmarks.md, "Outlinks from a table per folder").

Two generations bound the memory: tables used since the last turn are the young one, the others
are dropped at the next turn, which comes once the young tables took ``capacity`` entries. A table
used on every page (a site whose pages all link from one folder, each to new URLs) would be carried
from turn to turn and grow without end: one that holds half the capacity starts afresh instead.
"""

from __future__ import annotations

Table = dict[str, "str | None"]


class SharedTargets:
    """raw href -> its normalized target (None: rejected), one table per origin or folder prefix."""

    def __init__(self, capacity: int = 16384) -> None:
        self.capacity = capacity
        self._young: dict[str, Table] = {}
        self._old: dict[str, Table] = {}
        self._entries = 0  # what the young tables hold, about: counted as they are moved in or filled

    def table(self, prefix: str) -> Table:
        """The table of ``prefix``: an origin ('http://h') for hrefs from the root or absolute, a folder
        ('http://h/', 'http://h/a/') for relative ones, never the one for the other. Fill it with
        ``table[raw] = target`` and tell ``added`` how many were put in."""
        table = self._young.get(prefix)
        if table is None:
            table = self._old.pop(prefix, None)
            if table is None or len(table) > self.capacity // 2:
                table = {}
            else:
                self._entries += len(table)
            self._young[prefix] = table
            self._turn()
        return table

    def added(self, count: int) -> None:
        self._entries += count
        self._turn()

    def _turn(self) -> None:
        if self._entries > self.capacity:
            self._old, self._young, self._entries = self._young, {}, 0

    def __len__(self) -> int:
        """Entries held, in both generations."""
        return sum(map(len, self._young.values())) + sum(map(len, self._old.values()))
