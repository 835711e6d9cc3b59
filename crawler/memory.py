"""Hand memory a step no longer needs back to the kernel, between the steps of a long-lived process.

A fetch leaves its garbage in reference cycles (aiohttp's responses and connections, futures,
exceptions with their tracebacks) that CPython's generational collector reaches only at its next full
collection, and glibc's malloc keeps freed memory at the top of its heaps and in its arenas. Measured
on bench/realweb.py's crawl (docs/benchmarks.md), collecting and trimming after each step lowers the
resident set between steps by 70-80 MB, and a parse pool's part writer's peak by 50 MB. Both calls
take a few milliseconds: once a step or a part, not once a page.
"""

from __future__ import annotations

import ctypes
import gc
from typing import Any


def _malloc_trim() -> Any:
    # Looked up among the symbols the process has loaded, libc's among them: ctypes.util.find_library("c")
    # runs ldconfig to find libc's file, ~15 ms of every command's start and of the fork server's.
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # glibc only; musl and macOS have none
        return None


_TRIM = _malloc_trim()

# The young-generation threshold of a process that handles pages (the fetch process while it fetches, each parse
# process): Python's default, 700, collected a page's objects while they were still alive. In the fetch process
# most of them then survived a collection or two and fed full collections of the whole heap (60-100 ms pauses
# with every request stalled); a parse process's parse of a page makes ~800 element objects and no cycles, and
# ran a collection or two a page for nothing (1.4 % of its job's instructions, bench/job_instructions.py).
PAGE_GC_THRESHOLD = (20_000, 20, 20)


def collect_for_pages() -> None:
    """The collector of a process about to handle pages: what exists now (imports, config, caches) frozen, never
    traversed again, and the young generation collected every ``PAGE_GC_THRESHOLD[0]`` objects. Frozen without
    a collection first (``settle``'s took 15 ms of each parse process's start, for ~20 objects of garbage)."""
    gc.freeze()
    gc.set_threshold(*PAGE_GC_THRESHOLD)


def settle() -> None:
    """Exempt what is alive now (modules, the config, the process's long-lived state) from every later
    collection: ``give_back`` then costs ~0.2 ms instead of ~17 ms, and so does each full collection
    during a fetch. What is frozen still dies by reference count."""
    gc.collect()
    gc.freeze()


def give_back() -> None:
    """Collect reference cycles and return freed heap memory to the kernel where the C library can."""
    gc.collect()
    trim()


def trim() -> None:
    """Return freed heap memory to the kernel where the C library can (~0.2-0.4 ms on a parse process's
    heap, ~3 ms after a 2.5 MB page's tree was freed)."""
    if _TRIM is not None:
        _TRIM(0)
