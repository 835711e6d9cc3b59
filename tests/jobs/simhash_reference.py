"""The SimHash of crawler/jobs/traps.py, spelled out in plain Python one text at a time: the
definition the batched numpy version must equal bit for bit (the webdb keeps the values)."""

from __future__ import annotations

from crawler.jobs.traps import _SAMPLE, MAX_TEXT_BYTES

_M = (1 << 64) - 1


def _fmix(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _M
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _M
    return x ^ (x >> 33)


def simhash(text: str | None) -> int | None:
    data = (text or "").encode("utf-8", "replace")[:MAX_TEXT_BYTES]
    n = len(data)
    if not n:
        return None
    padded = data + bytes(24)

    def window(at: int) -> int:  # the 8 bytes from `at`, little-endian, zeros past the text
        return int.from_bytes(padded[at:at + 8], "little")

    starts = [0] + [i + 1 for i in range(n - 1) if data[i] == 32]
    if len(starts) > 2 * _SAMPLE:
        bound = (1 << 64) // (len(starts) // _SAMPLE)
        starts = [s for s in starts if (window(s) * 0xD6E8FEB86659FD93) & _M < bound] or starts
    features = {_fmix(window(s) ^ ((window(s + 8) * 0x9E3779B97F4A7C15) & _M)) for s in starts}
    value = sum(1 << bit for bit in range(64) if 2 * sum((f >> bit) & 1 for f in features) > len(features))
    return value - (1 << 64) if value >= 1 << 63 else value
