"""What the daemon's concurrent fetches share besides politeness: held URLs and one robots.txt cache."""

from __future__ import annotations

import signal
from pathlib import Path

import pyarrow.parquet as pq
import structlog

from crawler.daemon.shared import FetchShared, fetchlist_hashes
from crawler.devserver import SiteServer
from crawler.fetcher.redirects import HeldUrls, listed_hashes
from crawler.fetcher.service import Fetcher
from crawler.jobs.generate import generate
from crawler.segments.layout import Segment
from tests.daemon.conftest import daemon_args, seed, write_site
from tests.daemon.test_daemon import db_rows
from tests.daemon.test_shared_politeness import segment_named
from tests.fetcher.conftest import make_cfg, rows_by_url
from tests.jobs.conftest import NOW, page, write_db
from tests.jobs.conftest import make_cfg as jobs_cfg

FIRST, SECOND = "20260101T000000000Z", "20260101T000001000Z"


def moved_site(root: Path, pages: int) -> Path:
    """index.html linking /m{i} (301 to /p{i}.html) and /p{i}.html itself; robots.txt allows all."""
    write_site(root, pages, [f"/m{i}" for i in range(pages)])
    (root / "_redirects").write_text("".join(f"/m{i} /p{i}.html 301\n" for i in range(pages)))
    return root


async def fetch_in_turn(cfg, shared: FetchShared, *segments, generated_first: bool = False) -> list[list[dict]]:
    """Fetch the segments one after the other, none merged; the log events of each.

    ``generated_first``: every segment is held from the start, as if all were generated before the first ran.
    """
    for segment in segments if generated_first else ():
        shared.segment_starts(segment, fetchlist_hashes(segment))
    logs = []
    try:
        for segment in segments:
            if not generated_first:
                shared.segment_starts(segment, fetchlist_hashes(segment))
            with structlog.testing.capture_logs() as captured:
                await Fetcher(cfg, segment, structlog.get_logger(), **shared.fetcher_kwargs()).run()
            logs.append(captured)
    finally:
        await shared.aclose()
    return logs


class TestHeldUrls:
    async def test_a_page_one_segment_took_as_a_hop_is_not_fetched_by_another(self, tmp_path):
        """Segment A follows /m0 -> /p0.html; segment B lists /p0.html too: it is requested once, B logs why."""
        async with SiteServer(moved_site(tmp_path / "site", 2), "127.0.0.1") as site:
            cfg = make_cfg(tmp_path / "crawl")
            a = segment_named(tmp_path, FIRST, [site.url("/m0")])
            b = segment_named(tmp_path, SECOND, [site.url("/p0.html"), site.url("/p1.html")])
            _, b_logs = await fetch_in_turn(cfg, FetchShared(cfg, structlog.get_logger()), a, b)
        assert site.paths().count("/p0.html") == 1 and site.paths().count("/p1.html") == 1
        assert site.paths().count("/robots.txt") == 1  # one cache for both segments
        assert rows_by_url(a)[site.url("/p0.html")]["status"] == "success"
        assert site.url("/p0.html") not in rows_by_url(b)  # its row is A's: a retry row here would override it
        (held,) = [e for e in b_logs if e["event"] == "fetch.held_elsewhere"]
        assert held["url"] == site.url("/p0.html") and held["held_by"] == FIRST

    async def test_a_hop_to_a_page_another_segment_lists_is_left_to_that_segment(self, tmp_path):
        """A hop whose target another running segment lists is recorded on the source row and not followed."""
        async with SiteServer(moved_site(tmp_path / "site", 1), "127.0.0.1") as site:
            cfg = make_cfg(tmp_path / "crawl")
            a = segment_named(tmp_path, FIRST, [site.url("/m0")])
            b = segment_named(tmp_path, SECOND, [site.url("/p0.html")])
            await fetch_in_turn(cfg, FetchShared(cfg, structlog.get_logger()), a, b, generated_first=True)
        assert site.paths().count("/p0.html") == 1
        source = rows_by_url(a)[site.url("/m0")]
        assert source["redirect_url"] == site.url("/p0.html")
        assert f"not followed: redirect target in segment {SECOND}" in source["reason"]
        assert rows_by_url(b)[site.url("/p0.html")]["status"] == "success"

    def test_generate_leaves_out_the_hop_targets_it_is_given(self, tmp_path):
        """generate(exclude_urls=...) selects every due page but those: the daemon passes the held hop targets."""
        cfg = jobs_cfg(tmp_path)
        urls = [f"http://x.test/p{i}" for i in range(4)]
        write_db(cfg, [page(u) for u in urls])
        report = generate(cfg, structlog.get_logger(), NOW, exclude_urls=urls[1:3])
        listed = [row["url"] for part in report.segment.parts("fetchlist") for row in pq.read_table(part).to_pylist()]
        assert sorted(listed) == [urls[0], urls[3]]

    async def test_a_merged_segment_stays_held_until_the_fetches_that_started_before_it_end(self, tmp_path):
        """A fetch's webdb view is from its start: a segment merged meanwhile stays held for it until it ends."""
        shared = FetchShared(make_cfg(tmp_path), structlog.get_logger())
        a, b, c = (Segment(tmp_path / name) for name in (FIRST, SECOND, "20260101T000002000Z"))
        shared.segment_starts(a, listed_hashes(["http://x.test/a"]))
        shared.segment_starts(b, listed_hashes([]))
        shared.segment_ended(a)
        shared.segment_merged(a)
        assert shared.held.holder("http://x.test/a", b.name) == a.name  # b started before a's merge
        shared.segment_starts(c, listed_hashes([]))  # c's view includes a's merge
        shared.segment_ended(b)
        assert shared.held.holder("http://x.test/a", c.name) is None
        await shared.aclose()

    def test_a_merged_segment_holds_nothing_and_hop_targets_are_bounded(self):
        """forget() drops a merged segment's fetchlist and hops; past max_hops the oldest hop target is forgotten."""
        held = HeldUrls(max_hops=2)
        held.list_segment("a", listed_hashes(["http://x.test/1"]))
        for url in ("http://x.test/2", "http://x.test/3", "http://x.test/4"):
            held.take_hop(url, "a")
        assert held.hop_targets() == ["http://x.test/3", "http://x.test/4"]
        assert held.holder("http://x.test/1", "b") == "a" and held.holder("http://x.test/1", "a") is None
        held.forget("a")
        assert held.holder("http://x.test/1", "b") is None and held.hop_targets() == []


class TestDaemonSharing:
    async def test_redirect_targets_and_robots_are_requested_once_across_overlapped_segments(
            self, tmp_path, start_daemon):
        """While a Crawl-delay host holds a segment, the next one skips the hops it took; robots.txt once per host."""
        fast = moved_site(tmp_path / "fast", 4)
        slow = write_site(tmp_path / "slow", 4)
        (slow / "robots.txt").write_text("User-agent: *\nCrawl-delay: 1\n")
        async with SiteServer(fast, "127.0.0.2") as f, SiteServer(slow, "127.0.0.3") as s:
            seed(tmp_path, "seeds.txt", f.url("/"), s.url("/"))
            # 4 per host: the fast host's second segment is /m0../m3 (before /p*), whose hops fetch /p0../p3.
            args = daemon_args(tmp_path, "-D", "generate.max_per_host=4", "-D", "fetcher.per_host_concurrency=1")
            daemon = await start_daemon(*args, cwd=tmp_path)
            await daemon.wait_event("daemon.idle", reason="nothing due")
            daemon.signal(signal.SIGTERM)
            assert await daemon.wait_exit() == 0
        # A generate ran while the slow host's segment (the second) was fetching: the case this is about.
        events = [e.get("event") for e in daemon.events]
        second = daemon.find("fetch.start")[1]["segment"]
        during = events[daemon.events.index(daemon.find("fetch.start")[1]):
                        daemon.events.index(daemon.find("fetch.done", segment=second)[0])]
        assert "generate.empty" in during or "daemon.overlap" in during, daemon.tail(40)
        assert sorted(p for p in f.paths() if p.startswith("/p")) == [f"/p{i}.html" for i in range(4)]
        assert f.paths().count("/robots.txt") == 1 and s.paths().count("/robots.txt") == 1
        status = {row["url"]: row["status"] for row in await db_rows(tmp_path)}
        assert {status[f.url(f"/p{i}.html")] for i in range(4)} == {"fetched"}
        assert {status[f.url(f"/m{i}")] for i in range(4)} == {"redirect_perm"}

    async def test_parse_processes_parse_in_one_pool_for_the_daemons_life(self, tmp_path, three_hosts, start_daemon):
        """With fetcher.parse_processes=1 the daemon parses in worker processes it keeps across cycles."""
        a, b, _ = three_hosts
        seed(tmp_path, "a.txt", a.url("/"))
        daemon = await start_daemon(*daemon_args(tmp_path, "-D", "fetcher.parse_processes=1"), cwd=tmp_path)
        await daemon.wait_event("daemon.idle", reason="nothing due")
        # The daemon's one child is the parse process, still alive after every cycle: the pool's fork server
        # ended once it was forked, the daemon adopting it, and multiprocessing's resource tracker too.
        children = _children(daemon.proc.pid)
        grandchildren = {pid for child in children for pid in _children(int(child))}
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in children]
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0
        assert daemon.find("daemon.parse_pool", processes=1)
        assert len(children) == 1 and not grandchildren, (children, grandchildren)
        assert b"multiprocessing.forkserver" in commands[0]  # a fork of the server (a spawn runs .spawn)
        titles = {row["url"]: row["title"] for row in await parse_data_rows(tmp_path)}
        assert titles[a.url("/p3.html")] == "page 3" and titles[b.url("/")] == "index"


def _children(pid: int) -> set[str]:
    return {child for path in Path(f"/proc/{pid}/task").glob("*/children") for child in path.read_text().split()}


async def parse_data_rows(tmp_path: Path) -> list[dict]:
    parts = sorted((tmp_path / "crawl" / "segments").glob("*/parse_data/part-*.parquet"))
    return [row for part in parts for row in pq.read_table(part, columns=["url", "title"]).to_pylist()]
