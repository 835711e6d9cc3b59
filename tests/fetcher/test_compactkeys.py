"""The fetch's compact taken-URL memory keeps RecentKeys's promises (crawler/fetcher/compactkeys.py)."""

from __future__ import annotations

import random

import pytest

from crawler.fetcher.compactkeys import CompactKeys


@pytest.mark.parametrize("puts", [10, 99, 100, 101, 1_000, 12_345])
def test_remembers_the_newest_half_with_their_values_and_forgets_the_oldest(puts):
    size, chunk = 100, 8
    keys = CompactKeys(size, chunk=chunk)
    for key in range(puts):
        keys.put(key, key % 2 == 0)
    remembered = [k for k in range(puts) if k in keys]
    assert set(range(max(0, puts - size // 2), puts)) <= set(remembered)
    assert all(k >= puts - (size + 2 * chunk) for k in remembered)
    assert all(keys.get(k) == (k % 2 == 0) for k in remembered)
    assert keys.get(puts) is None and -1 not in keys


def test_a_newer_value_wins_over_an_older_run_and_generation():
    keys = CompactKeys(8, chunk=2)
    keys.put(1, False)
    keys.put(2, False)  # a run: {1, 2}
    keys.put(3, False)
    keys.put(4, False)  # a second run: the generation holds half the size and turns
    keys.put(1, True)
    assert keys.get(1) is True and keys.get(2) is False
    keys.put(5, False)  # 1 -> True is in a run of the newer generation now
    assert keys.get(1) is True and keys.get(3) is False and keys.get(6) is None


def test_random_hashes_answer_as_a_dict_of_the_newest_half():
    """Negative and positive 64-bit keys, many runs and turns: every key of the newest half answers its latest
    value, and a key never put answers nothing (the Bloom filters only decide whether the runs are searched)."""
    rng = random.Random(7)
    size, chunk = 2_000, 64
    keys = CompactKeys(size, chunk=chunk)
    history: list[tuple[int, bool]] = []
    pool = [rng.getrandbits(64) - (1 << 63) for _ in range(3_000)]
    for _ in range(20_000):
        key = rng.choice(pool) if rng.random() < 0.3 else rng.getrandbits(64) - (1 << 63)
        value = rng.random() < 0.5
        keys.put(key, value)
        history.append((key, value))
    latest: dict[int, bool] = {}
    for key, value in history[-size // 2:]:
        latest[key] = value
    assert all(keys.get(key) is value for key, value in latest.items())
    never = {rng.getrandbits(64) - (1 << 63) for _ in range(5_000)} - {k for k, _ in history}
    assert not any(key in keys for key in never)
