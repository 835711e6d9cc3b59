"""The fetch's garbage-collection settings are scoped to the fetch and lose no garbage."""

from __future__ import annotations

import gc
import weakref

from crawler.fetcher.runner import fetch_gc
from crawler.memory import PAGE_GC_THRESHOLD


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settings_are_put_back_and_cycles_still_collected():
    """During a fetch the heap is frozen and collections rarer; afterwards the defaults return, cycles go."""
    before = gc.get_threshold()
    made_before = _cycle()  # garbage already there when the fetch starts: frozen, then collected later
    with fetch_gc():
        assert gc.get_threshold() == PAGE_GC_THRESHOLD
        assert gc.get_freeze_count() > 0
        made_during = _cycle()
        gc.collect()
        assert made_during() is None  # a fetch's own cycles are collected while it runs
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert made_before() is None


def test_overlapping_fetches_share_one_scope():
    """Overlapping fetches (the daemon's) keep the settings until the last one ends, in any order."""
    before = gc.get_threshold()
    first, second = fetch_gc(), fetch_gc()
    first.__enter__()
    frozen = gc.get_freeze_count()
    second.__enter__()
    made_during = _cycle()  # made while both run: not frozen by the second start, so collected meanwhile
    assert gc.get_freeze_count() == frozen
    first.__exit__(None, None, None)  # the first to start ends first, as the daemon's older segment may
    assert gc.get_threshold() == PAGE_GC_THRESHOLD
    assert gc.get_freeze_count() == frozen
    gc.collect()
    assert made_during() is None
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_fetchs_cycles_are_collected_as_it_ends():
    """What a fetch leaves in reference cycles is freed when its scope ends (before updatedb adds its memory),
    by a collection made while the heap of before the fetch is still frozen, so not traversed."""
    gc.disable()  # only the scope collects
    try:
        with fetch_gc():
            made_during = _cycle()
        assert made_during() is None
        assert gc.get_freeze_count() == 0  # and what was frozen is collected later as usual
    finally:
        gc.enable()
