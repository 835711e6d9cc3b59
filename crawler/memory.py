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
import os
from typing import Any


def _libc(name: str) -> Any:
    # Looked up among the symbols the process has loaded, libc's among them: ctypes.util.find_library("c")
    # runs ldconfig to find libc's file, ~15 ms of every command's start and of the fork server's.
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):  # glibc only; musl and macOS have none
        return None


_TRIM = _libc("malloc_trim")
_MALLOPT = _libc("mallopt")
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
# A block this large or larger is mapped on its own and unmapped when freed: page bodies of several MB.
MMAP_THRESHOLD = 1 << 20
_MMAP_ENV = "MALLOC_MMAP_THRESHOLD_"


def fixed_mmap_threshold() -> None:
    """Keep glibc's mmap threshold at 1 MiB in this process and the processes it starts.

    glibc starts it at 128 KiB and raises it to the size of each mapped block freed (up to 32 MiB): after
    the first multi-MB page body, every body and buffer below that size comes from the heap, which keeps
    its highest extent wherever a live block sits above freed ones. Fixed at 1 MiB, the fetch process of
    bench/realweb.py's crawl held a median of 216-220 MB instead of 238-239 during the fetch, at the same
    speed; fixed at glibc's 128 KiB, ~15 % more CPU went to mapping (and the kernel zeroing) every body
    above it (docs/benchmarks.md). A value the user set is left as it is.
    """
    if _MMAP_ENV in os.environ:  # glibc read it when this process started
        return
    os.environ[_MMAP_ENV] = str(MMAP_THRESHOLD)  # read by the C library of each process started from here
    if _MALLOPT is not None:
        _MALLOPT(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


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
