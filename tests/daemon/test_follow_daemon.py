"""The daemon with in-round following, its default: a seeded site's pages in its first cycle, each asked once."""

from __future__ import annotations

from collections import Counter

from tests.daemon.conftest import daemon_args, seed


async def test_the_first_cycle_follows_a_site_and_no_page_is_asked_twice(tmp_path, three_hosts, start_daemon):
    a, b, c = three_hosts
    (tmp_path / "config.yaml").write_text("fetcher:\n  min_delay: 0\n  concurrency: 8\n")  # follow_depth: default
    seed(tmp_path, "a.txt", a.url("/"))
    daemon = await start_daemon(*daemon_args(tmp_path), cwd=tmp_path)
    await daemon.wait_event("daemon.idle", reason="nothing due")
    first = daemon.find("cycle.done")[0]
    # a's index and its six pages in cycle 1 (b is another host: its root waits for the next cycle).
    assert first["fetched"] == 7, first
    pages_a = Counter(r.path_qs for r in a.requests if r.path_qs != "/robots.txt")
    pages_b = Counter(r.path_qs for r in b.requests if r.path_qs != "/robots.txt")
    assert set(pages_a) == {"/", *(f"/p{i}.html" for i in range(6))}
    assert set(pages_b) == {"/", *(f"/p{i}.html" for i in range(6))}
    assert max([*pages_a.values(), *pages_b.values()]) == 1
    assert not c.requests
    await daemon.kill()
