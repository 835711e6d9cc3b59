"""A fetch's taken-URL memory in ~10 bytes a URL: RecentKeys's contract, without an int object per key.

``RedirectPolicy`` remembers every URL a fetch takes (each fetchlist entry, hop
and followed link, by its str hash) for the newest ~200,000 of them. As two
generations of dicts that memory was ~25 MB of a fetch process past 100,000
entries, more than the keys themselves: each 64-bit key is an int object, and
a generation's turn freed 100,000 of them among live objects, which left the
heap fragmented. It was half of why the fetch's peak RSS grew from 100k to 1M
entries (docs/benchmarks.md).

Here the newest keys sit in a small dict; each time it fills it becomes a
sorted run of keys (an ``array``) with their values (a ``bytes``). Runs make
up two generations: the older is dropped whole when the newer holds half the
size, so the newest half is always kept, as in ``RecentKeys``. Most lookups
are of URLs never taken (every fetchlist entry is looked up once before it is
put), so each generation has a small Bloom filter in front of its runs: a key
no run holds costs two bit tests there, and only a filter hit searches the
runs (``bisect``: C speed, but an int object made at each of its ~17 steps).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

_CHUNK = 16_384  # keys in the dict before they become a run: ~1.5 MB, and ~6 runs per generation of 100,000
_BITS_PER_KEY = 8  # Bloom filter bits per key of a generation, two probes: ~5 % of misses search the runs


class _Generation:
    __slots__ = ("bits", "count", "mask", "runs")

    def __init__(self, capacity: int) -> None:
        nbits = 1 << max(6, (capacity * _BITS_PER_KEY - 1).bit_length())
        self.bits = bytearray(nbits >> 3)
        self.mask = nbits - 1
        self.runs: list[tuple[array, bytes]] = []  # sorted keys and their values; the newest last
        self.count = 0

    def add(self, items: list[tuple[int, bool]]) -> None:
        items.sort()
        keys = array("q", [k for k, _ in items])
        self.runs.append((keys, bytes(v for _, v in items)))
        self.count += len(keys)
        bits, mask = self.bits, self.mask
        for key in keys:
            a, b = key & mask, (key >> 32) & mask
            bits[a >> 3] |= 1 << (a & 7)
            bits[b >> 3] |= 1 << (b & 7)

    def get(self, key: int) -> bool | None:
        mask, bits = self.mask, self.bits
        a, b = key & mask, (key >> 32) & mask
        if not (bits[a >> 3] >> (a & 7) & 1 and bits[b >> 3] >> (b & 7) & 1):
            return None
        for keys, values in reversed(self.runs):  # the newest run first: a key put again answers its latest value
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                return bool(values[i])
        return None


class CompactKeys:
    """hash -> bool for about the last ``size`` keys put, as ``RecentKeys`` (``put``, ``get``, ``in``): the newest
    ``size // 2`` always, and none older than ``size + 2 * chunk`` puts (a generation turns at whole runs)."""

    __slots__ = ("chunk", "half", "new", "old", "pending")

    def __init__(self, size: int, chunk: int = _CHUNK) -> None:
        self.half = max(1, size // 2)
        self.chunk = max(1, min(chunk, self.half))
        self.pending: dict[int, bool] = {}
        self.new = _Generation(self.half)
        self.old = _Generation(self.half)

    def put(self, key: int, value: bool) -> None:
        pending = self.pending
        pending[key] = value
        if len(pending) >= self.chunk:
            self.pending = {}
            self.new.add(list(pending.items()))
            if self.new.count >= self.half:
                self.old, self.new = self.new, _Generation(self.half)

    def get(self, key: int) -> bool | None:
        value = self.pending.get(key)
        if value is None:
            value = self.new.get(key)
            if value is None:
                value = self.old.get(key)
        return value

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None
