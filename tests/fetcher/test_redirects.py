"""Redirects followed by the fetcher: chains, loops, limits, robots, politeness and the address policy per hop."""

from __future__ import annotations

import pytest
import structlog

from crawler.fetcher.records import fetch_row
from crawler.fetcher.redirects import RecentKeys
from crawler.fetcher.service import fetch_segment
from crawler.models import FetchStatus
from crawler.segments.writer import PartitionWriter
from tests.fetcher.conftest import fetch, make_cfg, make_segment, page, redirect, robots, rows_by_url


class TestChains:
    async def test_chain_is_followed_and_recorded(self, tmp_path, servers):
        """A 301 -> 302 -> 200 chain is fetched in one run; each hop's row names the chain's source and hop number."""
        site = await servers("127.0.0.1", {"/a": redirect("/b"), "/b": redirect("/c", 302), "/c": page()})
        _, rows, _ = await fetch(tmp_path, [site.url("/a")])
        a, b, c = rows[site.url("/a")], rows[site.url("/b")], rows[site.url("/c")]
        assert (a["status"], a["redirect_url"], a["redirect_hop"]) == ("redirect_perm", site.url("/b"), None)
        assert (b["status"], b["redirect_url"], b["redirect_hop"]) == ("redirect_temp", site.url("/c"), 1)
        assert (c["status"], c["http_status"], c["redirect_hop"]) == ("success", 200, 2)
        assert b["redirect_source"] == c["redirect_source"] == site.url("/a")
        assert site.paths().count("/c") == 1

    async def test_loop_is_detected(self, tmp_path, servers):
        """x -> y -> x stops at the loop: each URL is requested once and the reason says why."""
        site = await servers("127.0.0.1", {"/x": redirect("/y"), "/y": redirect("/x")})
        _, rows, _ = await fetch(tmp_path, [site.url("/x")])
        assert sorted(rows) == [site.url("/x"), site.url("/y")]
        assert "redirect loop" in rows[site.url("/y")]["reason"]
        assert site.paths().count("/x") == 1

    async def test_max_redirects_limits_the_hops(self, tmp_path, servers):
        """With http.max_redirects=1 the second hop is not followed; its target is left for updatedb."""
        site = await servers("127.0.0.1", {"/a": redirect("/b"), "/b": redirect("/c"), "/c": page()})
        _, rows, _ = await fetch(tmp_path, [site.url("/a")], "http.max_redirects=1")
        assert site.url("/c") not in rows
        assert rows[site.url("/b")]["redirect_url"] == site.url("/c")
        assert "http.max_redirects" in rows[site.url("/b")]["reason"]
        assert "/c" not in site.paths()

    async def test_shared_target_is_fetched_once(self, tmp_path, servers):
        """Many pages redirecting to one target fetch it once in a segment (no duplicate rows)."""
        routes = {f"/old{i}": redirect("/new") for i in range(5)}
        site = await servers("127.0.0.1", {**routes, "/new": page()})
        _, rows, _ = await fetch(tmp_path, [site.url(f"/old{i}") for i in range(5)])
        assert rows[site.url("/new")]["status"] == "success"
        assert site.paths().count("/new") == 1

    async def test_only_a_3xx_location_redirects(self, tmp_path, servers):
        """A Location on a 200 or a 404 is ignored; a 3xx without one is gone; 302 with one is redirect_temp."""
        site = await servers("127.0.0.1", {
            "/ok": page(headers={"Location": "/elsewhere"}),
            "/missing": page(status=404, headers={"Location": "/elsewhere"}),
            "/bare": redirect("", status=301),
            "/temp": redirect("/target", status=302),
            "/target": page(),
        })
        urls = [site.url(p) for p in ("/ok", "/missing", "/bare", "/temp")]
        _, rows, _ = await fetch(tmp_path, urls)
        assert [(rows[u]["status"], rows[u]["redirect_url"]) for u in urls] == [
            ("success", None), ("gone", None), ("gone", None), ("redirect_temp", site.url("/target"))]
        assert "/elsewhere" not in site.paths()

    async def test_filtered_target_is_not_followed(self, tmp_path, servers):
        """A hop whose target urls.filters rejects is recorded on the source row, not fetched."""
        site = await servers("127.0.0.1", {"/a": redirect("/skip/me"), "/skip/me": page()})
        _, rows, _ = await fetch(tmp_path, [site.url("/a")], "urls.filters=['-/skip/', '+.']")
        assert "filtered" in rows[site.url("/a")]["reason"]
        assert "/skip/me" not in site.paths()


class TestHopsArePolite:
    async def test_redirect_into_disallowed_path_is_not_requested(self, tmp_path, servers):
        """A hop into a robots-disallowed path is recorded robots_denied and never requested."""
        site = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: *\nDisallow: /private/\n"),
                                           "/a": redirect("/private/x"), "/private/x": page()})
        _, rows, _ = await fetch(tmp_path, [site.url("/a")])
        assert rows[site.url("/private/x")]["status"] == "robots_denied"
        assert "/private/x" not in site.paths()

    async def test_cross_host_hop_waits_for_the_target_hosts_delay(self, tmp_path, servers):
        """A hop to another host goes through that host's queue: its requests stay min_delay apart."""
        target = await servers("127.0.0.2", {f"/p{i}": page() for i in range(3)})
        source = await servers("127.0.0.1", {"/go": redirect(target.url("/p0"))})
        urls = [source.url("/go"), target.url("/p1"), target.url("/p2")]
        _, rows, _ = await fetch(tmp_path, urls, "fetcher.min_delay=0.3")
        assert rows[target.url("/p0")]["status"] == "success"
        starts = sorted(h.started for h in target.hits if h.path != "/robots.txt")
        assert len(starts) == 3
        assert min(b - a for a, b in zip(starts, starts[1:], strict=False)) >= 0.3 - 0.01


class TestPrivateAddresses:
    async def test_redirect_cannot_smuggle_in_a_private_address(self, tmp_path, servers):
        """With private networks refused, a redirect to a private address (literal or by name) fails and is never sent."""
        inner = await servers("127.0.0.2", {"/secret": page()})
        outer = await servers("127.0.0.1", {
            "/literal": redirect(inner.url("/secret")),
            "/named": redirect(f"http://intranet.test:{inner.port}/secret"),
        })
        _, rows, _ = await fetch(
            tmp_path, [outer.url("/literal"), outer.url("/named")],
            "http.allow_private_networks=false", "http.private_allowlist=['127.0.0.1']",
            "http.resolve={intranet.test: 127.0.0.2}",
        )
        assert rows[outer.url("/literal")]["status"] == "redirect_perm"
        for url in (inner.url("/secret"), f"http://intranet.test:{inner.port}/secret"):
            assert rows[url]["status"] == "failed"
            assert rows[url]["reason"].startswith("blocked_address")
        assert inner.hits == []


class TestResumedSegment:
    async def test_hop_to_a_url_a_cut_off_run_committed_is_not_fetched_again(self, tmp_path, servers):
        """After a cut-off run committed /new, a resumed fetch does not follow /old's redirect to it: one row each."""
        site = await servers("127.0.0.1", {"/old": redirect("/new"), "/new": page()})
        cfg = make_cfg(tmp_path)
        seg = make_segment(tmp_path, [site.url("/new"), site.url("/old")])
        # What a run killed after its first commit leaves: a part with /new's row, the partition not done.
        new = {"url": site.url("/new"), "host": "127.0.0.1", "partition": 0, "score": 1.0,
               "db_status": "unfetched", "retries": 0}
        writer = PartitionWriter(seg, 0, commit_records=100, commit_interval=60)
        writer.add(fetch_row(new, FetchStatus.SUCCESS, reason="200 OK"))
        await writer.commit()

        await fetch_segment(cfg, seg, structlog.get_logger())
        rows = rows_by_url(seg)  # asserts no URL has two rows
        assert "already fetched in this segment" in rows[site.url("/old")]["reason"]
        assert site.paths().count("/new") == 0


class TestRecentTaken:
    @pytest.mark.parametrize("puts", [10, 99, 100, 101, 1_000, 12_345])
    def test_remembers_at_least_the_last_half_and_never_more_than_size(self, puts):
        """RecentKeys (in-round following's memories; the taken URLs were kept so until CompactKeys) keeps the
        newest size/2 keys at least, and no key older than size puts."""
        recent = RecentKeys(100)
        for key in range(puts):
            recent.put(key, key % 2 == 0)
        remembered = [k for k in range(puts) if k in recent]
        assert set(range(max(0, puts - 50), puts)) <= set(remembered)
        assert len(remembered) <= 100 and all(k >= puts - 100 for k in remembered)
        assert all(recent.get(k) == (k % 2 == 0) for k in remembered)

    def test_a_newer_value_wins_over_an_older_generation(self):
        """A key put again (a fetched URL later taken as a hop) answers with its latest value."""
        recent = RecentKeys(4)
        recent.put(1, False)
        recent.put(2, False)  # the first generation is full: 1 and 2 move to the older one
        recent.put(1, True)
        assert recent.get(1) is True and recent.get(2) is False and recent.get(3) is None
