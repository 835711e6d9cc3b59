"""The parse pool's pipes: pages larger than a pipe, several partitions, and a parse process that dies."""

from __future__ import annotations

import os
import signal

import structlog
from structlog.testing import capture_logs

from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.service import fetch_segment
from tests.fetcher.conftest import make_cfg, make_segment, page, read_rows
from tests.fetcher.test_parsepool import _segment_view

BIG = ("<html><head><title>Big {n}</title></head><body>"
       + "<p>{n} lorem ipsum dolor sit amet</p>" * 9000 + "<a href='/b{m}'>next</a></body></html>")


class TestParsePoolPipes:
    async def test_pages_beyond_the_pipe_and_parts_of_several_partitions(self, tmp_path, servers):
        """Pages of ~300 kB (more in flight than a pipe holds) over 3 partitions give the in-process segment."""
        sites = [await servers(f"127.0.0.{i}", {f"/b{n}": page(BIG.format(n=n, m=n + 1)) for n in range(6)})
                 for i in (1, 2, 3)]
        urls = [site.url(f"/b{n}") for site in sites for n in range(6)]
        views = []
        for name, processes in (("inline", 0), ("pool", 2)):
            cfg = make_cfg(tmp_path / name, f"fetcher.parse_processes={processes}", "fetcher.commit_records=4")
            seg = make_segment(tmp_path / name, urls, partitions=3)
            if processes:
                with ParsePool(cfg, processes) as pool:
                    report = await fetch_segment(cfg, seg, structlog.get_logger(), parse_pool=pool)
            else:
                report = await fetch_segment(cfg, seg, structlog.get_logger())
            assert not report.stopped and seg.is_done("parse_text")
            views.append(_segment_view(seg))
        inline, pooled = views
        assert pooled == inline
        assert len(pooled["parse_text"]) == len(urls)
        assert all(len(r["text"]) > 250_000 for r in pooled["parse_text"])

    async def test_a_dead_parse_process_costs_the_parse_rows_never_the_pages(self, tmp_path, servers):
        """With its only parse process killed, every page still gets its fetcher row and WARC record."""
        site = await servers("127.0.0.1", {f"/p{n}": page() for n in range(5)})
        urls = [site.url(f"/p{n}") for n in range(5)]
        cfg = make_cfg(tmp_path, "fetcher.parse_processes=1")
        seg = make_segment(tmp_path, urls)
        with ParsePool(cfg, 1) as pool:
            parser = next(c for c in pool._children if c.name == "parse-0")
            os.kill(parser.pid, signal.SIGKILL)
            os.waitpid(parser.pid, 0)  # the pool's processes are this process's once they run (forkserver.hand_over)
            with capture_logs() as logs:
                report = await fetch_segment(cfg, seg, structlog.get_logger(), parse_pool=pool)
        assert not report.stopped and seg.is_done("fetcher")
        assert sorted(r["url"] for r in read_rows(seg)) == sorted(urls)
        assert {r["status"] for r in read_rows(seg)} == {"success"}
        assert len(_segment_view(seg)["content"]) == 2 * len(urls)  # response and request records
        assert read_rows(seg, "parse_data") == []
        assert any(e["event"] == "parse.error" for e in logs)
