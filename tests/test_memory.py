"""crawler/memory.py: what a step leaves in reference cycles is collected between steps."""

from __future__ import annotations

import gc
import os
import platform
import subprocess
import sys
import weakref

import pytest

from crawler.memory import MMAP_THRESHOLD, give_back, settle


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cycle collector frees it


def test_give_back_frees_the_garbage_in_reference_cycles():
    gc.disable()  # so that nothing but give_back collects
    try:
        node = _Node()
        gone = weakref.ref(node)
        del node
        assert gone() is not None
        give_back()
        assert gone() is None
    finally:
        gc.enable()


def test_settle_exempts_what_lives_now_and_still_collects_what_comes_after():
    try:
        settle()
        assert gc.get_freeze_count() > 0
        node = _Node()
        gone = weakref.ref(node)
        del node
        give_back()
        assert gone() is None
    finally:
        gc.unfreeze()


# In a process of its own (glibc's malloc state is per process): an 8 MiB block freed, then 40 blocks of
# 2 MiB of which every other one is freed. Prints the MiB still resident of those freed, and the variable.
_HOLES = """
import os, sys
from crawler import memory
if sys.argv[1] == "fixed":
    memory.fixed_mmap_threshold()
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
big = b"x" * (8 << 20)
del big
blocks = [bytes([i % 256]) * (2 << 20) for i in range(40)]
before = resident()
del blocks[::2]
print(before - resident(), os.environ.get("MALLOC_MMAP_THRESHOLD_"))
"""


def _holes(mode: str, **env: str) -> tuple[float, str]:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"} | env
    out = subprocess.run([sys.executable, "-c", _HOLES, mode], capture_output=True, text=True, check=True,
                         env=environ).stdout.split()
    return float(out[0]), out[1]


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's malloc")
def test_blocks_freed_below_a_large_one_go_back_with_the_threshold_fixed():
    """glibc alone raises its threshold to the 8 MiB block freed and keeps the 2 MiB blocks in its heap, where
    the freed ones stay resident between live ones; fixed, each is mapped on its own and unmapped when freed."""
    dynamic, unset = _holes("dynamic")
    fixed, value = _holes("fixed")
    assert unset == "None" and dynamic < 5
    assert value == str(MMAP_THRESHOLD) and fixed > 30  # of the 40 MiB freed


def test_a_threshold_the_user_set_is_kept():
    _, value = _holes("fixed", MALLOC_MMAP_THRESHOLD_="65536")
    assert value == "65536"
