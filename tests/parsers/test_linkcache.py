"""The parser's tables of hrefs across pages stay within their bound and keep what is in use."""

from __future__ import annotations

from crawler.parsers.linkcache import SharedTargets


def test_tables_are_bounded_by_two_generations():
    """However many folders and hrefs pass, the tables hold at most about twice the capacity."""
    shared = SharedTargets(capacity=100)
    for folder in range(500):
        table = shared.table(f"http://h.example/{folder}/")
        for i in range(7):
            table[f"{i}.html"] = f"http://h.example/{folder}/{i}.html"
        shared.added(7)
        assert len(shared) <= 2 * 100 + 7
    assert len(shared) >= 100  # the last generation's tables are still there


def test_a_table_used_on_every_page_is_bounded_too():
    """One folder whose every page links to new URLs (an endless listing): its table starts afresh, the
    tables stay within their bound."""
    shared = SharedTargets(capacity=100)
    for page in range(1000):
        table = shared.table("http://h.example/list/")
        for i in range(5):
            table[f"item-{page}-{i}.html"] = f"http://h.example/list/item-{page}-{i}.html"
        shared.added(5)
        assert len(shared) <= 2 * (100 + 5)


def test_a_table_in_use_survives_each_turn():
    """A folder's table used in every generation keeps its entries; one left unused goes at the second turn."""
    shared = SharedTargets(capacity=50)
    hot = shared.table("http://h.example/hot/")
    hot["a.html"] = "http://h.example/hot/a.html"
    shared.added(1)
    cold = shared.table("http://h.example/cold/")
    cold["b.html"] = "http://h.example/cold/b.html"
    shared.added(1)
    for turn in range(3):
        for n in range(60):  # more than the capacity: at least one turn
            shared.table(f"http://other.example/{turn}/{n}/")
            shared.added(1)
        assert shared.table("http://h.example/hot/") == {"a.html": "http://h.example/hot/a.html"}
    assert shared.table("http://h.example/cold/") == {}
