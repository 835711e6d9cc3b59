"""crawler/memory.py: what a step leaves in reference cycles is collected between steps."""

from __future__ import annotations

import gc
import weakref

from crawler.memory import give_back, settle


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
