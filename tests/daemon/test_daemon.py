"""crawler daemon end to end: a real subprocess crawling real loopback hosts, driven by signals."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from datetime import datetime
from pathlib import Path

import duckdb
from warcio.archiveiterator import ArchiveIterator

from crawler.daemon.wake import utc_now
from tests.conftest import run_crawler
from tests.daemon.conftest import daemon_args, http_get, seed, write_site
from tests.procs import kill_child

ALL_PAGES = 7  # index + 6 pages per host


def fetched_on(server) -> set[str]:
    return {r.path_qs for r in server.requests if r.status == 200 and r.path_qs != "/robots.txt"}


async def db_rows(tmp_path: Path) -> list[dict]:
    dump = await run_crawler("readdb", "--dump", "-D", f"crawl_dir={tmp_path / 'crawl'}", "-D", "log.format=json",
                             cwd=tmp_path)
    assert dump.code == 0, dump.stderr
    return [json.loads(line) for line in dump.stdout.splitlines()]


def assert_all_readable(crawl: Path, *, killed: bool = False) -> list[str]:
    """Every Parquet and WARC file under crawl_dir reads back whole; no temp file is left. Returns fetched URLs.

    ``killed``: the daemon was SIGKILLed, maybe mid-write, so temp files may be left (the restart removes them).
    """
    assert killed or not list(crawl.rglob(".tmp-*")), list(crawl.rglob(".tmp-*"))
    con = duckdb.connect()
    for part in crawl.rglob("*.parquet"):
        con.execute(f"SELECT count(*) FROM read_parquet('{part}')").fetchall()
    for warc in crawl.rglob("*.warc.gz"):
        with open(warc, "rb") as fh:
            assert sum(1 for record in ArchiveIterator(fh) if record.content_stream().read() is not None)
    parts = list(crawl.glob("segments/*/fetcher/part-*.parquet"))
    if not parts:
        return []
    listed = ", ".join(f"'{p}'" for p in parts)
    return [row[0] for row in con.execute(f"SELECT url FROM read_parquet([{listed}])").fetchall()]


class TestCrawling:
    async def test_crawls_and_answers_metrics_and_status(self, tmp_path, three_hosts, start_daemon):
        """It crawls every reachable page of the seeded hosts and serves /metrics and /status while running."""
        a, b, c = three_hosts
        seed(tmp_path, "a.txt", a.url("/"))
        daemon = await start_daemon(*daemon_args(tmp_path), cwd=tmp_path)
        port = await daemon.port()
        await daemon.wait_event("daemon.idle", reason="nothing due")
        assert fetched_on(a) == {"/", *(f"/p{i}.html" for i in range(6))}
        assert len(fetched_on(b)) == ALL_PAGES
        assert not c.requests

        status_code, ctype, body = await http_get(port, "/status")
        assert status_code == 200 and ctype.startswith("application/json")
        status = json.loads(body)
        assert {"phase", "segment", "pages_per_second", "uptime_seconds", "cycle"} <= status.keys()
        assert status["uptime_seconds"] > 0 and status["cycle"] >= 3
        assert status["fetched_total"] >= 2 * ALL_PAGES

        status_code, ctype, metrics = await http_get(port, "/metrics")
        assert status_code == 200 and ctype.startswith("text/plain")
        values = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                  for line in metrics.splitlines() if line and not line.startswith("#")}
        assert values['crawler_pages_fetched_total{status="2xx"}'] >= 2 * ALL_PAGES
        assert values["crawler_bytes_fetched_total"] > 0
        assert values["crawler_fetch_duration_seconds_count"] >= 2 * ALL_PAGES
        assert values['crawler_cycles_total{outcome="done"}'] >= 3
        assert values['crawler_webdb_pages{status="fetched"}'] == 2 * ALL_PAGES
        for name in ("crawler_queued_entries", "crawler_active_hosts", "crawler_cycle_duration_seconds_count"):
            assert name in values, name

        done = daemon.find("cycle.done")
        assert done and all({"cycle", "segment", "fetched", "elapsed_s", "phases_s"} <= e.keys() for e in done)
        assert all(e["phase"] == "fetch" for e in daemon.find("fetch.start"))

        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0

    async def test_outlinks_over_the_cap_show_in_metrics(self, tmp_path, three_hosts, start_daemon):
        """Outlinks db.max_outlinks cuts are counted in crawler_outlinks_over_cap_total, and not fetched."""
        a, b, _ = three_hosts
        seed(tmp_path, "a.txt", a.url("/"))
        daemon = await start_daemon(*daemon_args(tmp_path, "-D", "db.max_outlinks=4"), cwd=tmp_path)
        port = await daemon.port()
        await daemon.wait_event("daemon.idle", reason="nothing due")
        assert fetched_on(a) == {"/", *(f"/p{i}.html" for i in range(4))} and not b.requests  # 3 of 7 links cut
        _, _, metrics = await http_get(port, "/metrics")
        assert 'crawler_outlinks_over_cap_total{cap="db.max_outlinks"} 3.0' in metrics.splitlines()
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0

    async def test_seed_file_dropped_later_is_crawled(self, tmp_path, three_hosts, start_daemon):
        """A seed file dropped into daemon.seeds while the daemon runs is injected once and crawled."""
        a, _b, c = three_hosts
        seed(tmp_path, "a.txt", a.url("/"))
        daemon = await start_daemon(*daemon_args(tmp_path), cwd=tmp_path)
        await daemon.wait_event("daemon.idle", reason="nothing due")
        mark = len(daemon.events)
        seed(tmp_path, "c.txt", c.url("/"))
        injected = await daemon.wait_event("daemon.seeds_injected", after=mark)
        assert injected["file"].endswith("c.txt") and injected["injected"] == 1
        await daemon.wait_event("daemon.idle", after=len(daemon.events), reason="nothing due")
        assert len(fetched_on(c)) == ALL_PAGES
        assert len(daemon.find("daemon.seeds_injected")) == 2  # a.txt is not injected again
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0
        rows = await db_rows(tmp_path)
        assert sum(1 for r in rows if r["url"].startswith(c.url("/")) and r["status"] == "fetched") == ALL_PAGES


class TestSignals:
    async def test_sighup_changes_the_per_host_concurrency_the_server_sees(self, tmp_path, three_hosts,
                                                                           start_daemon):
        """After SIGHUP with a higher per-host limit the host sees parallel requests; bad config is refused."""
        a, _b, _c = three_hosts
        a.delay = 0.15
        write_site(Path(a.root), 30)
        config = tmp_path / "config.yaml"
        fetcher = "fetcher:\n  min_delay: 0\n  concurrency: 8\n  follow_depth: 0\n  per_host_concurrency: {}\n"
        config.write_text(f"crawl_dir: {tmp_path / 'crawl'}\n" + fetcher.format(1))
        seed(tmp_path, "a.txt", a.url("/"))
        args = daemon_args(tmp_path, "-D", "generate.top_n=8")
        where = args.index(f"crawl_dir={tmp_path / 'crawl'}")
        del args[where - 1:where + 1]  # crawl_dir comes from the file, so a reload can try to change it
        daemon = await start_daemon(*args, cwd=tmp_path)
        await daemon.wait_event("cycle.done", cycle=2)
        assert a.max_in_flight == 1

        config.write_text("fetcher: [not, a, mapping\n")
        mark = len(daemon.events)
        daemon.signal(signal.SIGHUP)
        failed = await daemon.wait_event("config.reload_failed", after=mark)
        assert str(config) in failed["error"]

        config.write_text(f"crawl_dir: {tmp_path / 'somewhere-else'}\n" + fetcher.format(4))
        mark = len(daemon.events)
        daemon.signal(signal.SIGHUP)
        reloaded = await daemon.wait_event("config.reloaded", after=mark)
        assert "fetcher.per_host_concurrency" in reloaded["changed"]
        assert reloaded["restart_required"] == ["crawl_dir"]
        # Live when a fetch is running and can be reconfigured, else from the next segment: both within a cycle.
        await daemon.wait_event("cycle.done", after=len(daemon.events))
        assert a.max_in_flight > 1, daemon.tail(40)
        assert not (tmp_path / "somewhere-else").exists()
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0

    async def test_sighup_moving_log_file_closes_the_old_one(self, tmp_path, start_daemon):
        """SIGHUP with a new log.file writes there from then on, and the process no longer holds the old file."""
        old, new = tmp_path / "old.log", tmp_path / "new.log"
        config = tmp_path / "config.yaml"
        config.write_text(f"fetcher:\n  min_delay: 0\nlog:\n  file: {old}\n")
        daemon = await start_daemon(*daemon_args(tmp_path), cwd=tmp_path)
        await daemon.wait_event("daemon.idle")
        config.write_text(f"fetcher:\n  min_delay: 0\nlog:\n  file: {new}\n")
        daemon.signal(signal.SIGHUP)
        await daemon.wait_event("config.reloaded")
        open_files = {os.readlink(fd) for fd in Path(f"/proc/{daemon.proc.pid}/fd").iterdir()}
        assert str(new) in open_files and str(old) not in open_files
        assert "config.reloaded" in new.read_text() and "config.reloaded" not in old.read_text()
        assert "daemon.start" in old.read_text()
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0

    async def test_sigterm_mid_fetch_exits_0_with_all_records_readable(self, tmp_path, three_hosts, start_daemon):
        """SIGTERM during a fetch drains in-flight requests, commits, exits 0; a restart finishes the crawl."""
        a, b, _c = three_hosts
        a.delay = b.delay = 0.2
        seed(tmp_path, "a.txt", a.url("/"))
        args = daemon_args(tmp_path, "-D", "daemon.shutdown_timeout=20s", "-D", "fetcher.commit_records=1",
                           "-D", "fetcher.per_host_concurrency=1")
        daemon = await start_daemon(*args, cwd=tmp_path)
        await daemon.wait_event("fetch.start", cycle=2)
        await daemon.wait_for(lambda _e: len(fetched_on(a)) >= 3, "a few pages of the second segment")
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit(timeout=20 + 10) == 0
        assert daemon.find("daemon.stopped", forced=False)
        committed = assert_all_readable(tmp_path / "crawl")
        assert len(committed) == len(set(committed)) >= 3

        daemon = await start_daemon(*args, cwd=tmp_path)
        await daemon.wait_event("daemon.idle", reason="nothing due")
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0
        rows = await db_rows(tmp_path)
        assert sum(1 for r in rows if r["status"] == "fetched") == 2 * ALL_PAGES
        urls = assert_all_readable(tmp_path / "crawl")
        assert len(urls) == len(set(urls)) == 2 * ALL_PAGES

    async def test_sigkill_then_restart_resumes_without_loss_or_duplicates(self, tmp_path, three_hosts,
                                                                          start_daemon):
        """After SIGKILL mid-fetch (and stray temp files), a restart cleans up and ends with every URL once."""
        a, b, _c = three_hosts
        a.delay = b.delay = 0.2
        seed(tmp_path, "a.txt", a.url("/"))
        args = daemon_args(tmp_path, "-D", "fetcher.commit_records=1")
        daemon = await start_daemon(*args, cwd=tmp_path)
        await daemon.wait_event("fetch.start", cycle=2)
        await daemon.wait_for(lambda _e: len(fetched_on(a)) >= 3, "a few pages of the second segment")
        kill_child(daemon.proc)
        assert await daemon.wait_exit() == -signal.SIGKILL
        crawl = tmp_path / "crawl"
        committed_before = assert_all_readable(crawl, killed=True)
        assert committed_before
        segment = sorted((crawl / "segments").iterdir())[-1]
        (segment / "fetcher" / ".tmp-part-00000-00099.parquet.1").write_bytes(b"half a part")
        (crawl / "webdb" / ".tmp-v000099.1").mkdir()

        daemon = await start_daemon(*args, cwd=tmp_path)
        recovered = await daemon.wait_event("daemon.recovered")
        assert recovered["temp_files_removed"] >= 2 and recovered["to_resume"] == [segment.name]
        await daemon.wait_event("daemon.idle", reason="nothing due")
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0
        urls = assert_all_readable(crawl)
        assert set(committed_before) <= set(urls)
        assert len(urls) == len(set(urls)) == 2 * ALL_PAGES
        rows = await db_rows(tmp_path)
        assert sorted(r["url"] for r in rows if r["status"] == "fetched") == sorted(urls)

    async def test_second_signal_exits_at_once(self, tmp_path, three_hosts, start_daemon):
        """A second SIGTERM during a long drain exits at once, leaving only complete files."""
        a, _b, _c = three_hosts
        a.delay = 3.0
        seed(tmp_path, "a.txt", a.url("/"))
        daemon = await start_daemon(*daemon_args(tmp_path, "-D", "daemon.shutdown_timeout=60s"), cwd=tmp_path)
        await daemon.wait_for(lambda _e: a.in_flight > 0 and a.requests, "a slow request in flight")
        daemon.signal(signal.SIGTERM)
        await daemon.wait_event("daemon.stopping")
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit(timeout=10) == 128 + signal.SIGTERM
        assert daemon.find("daemon.exit_now")
        for part in (tmp_path / "crawl").rglob("*.parquet"):
            duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{part}')").fetchall()


class TestLifecycle:
    async def test_max_cycles_and_keep_segments(self, tmp_path, three_hosts, start_daemon):
        """With daemon.max_cycles it exits 0 by itself; merged segments beyond keep_segments are archived."""
        a, _b, _c = three_hosts
        seed(tmp_path, "a.txt", a.url("/"))
        archive = tmp_path / "archive"
        args = daemon_args(tmp_path, "-D", "daemon.max_cycles=3", "-D", "daemon.keep_segments=1",
                           "-D", f"daemon.archive_dir={archive}", "-D", "metrics.listen=")
        daemon = await start_daemon(*args, cwd=tmp_path)
        assert await daemon.wait_exit() == 0
        assert len(daemon.find("cycle.done")) == 3
        assert not daemon.find("metrics.listening")
        kept = [p.name for p in (tmp_path / "crawl" / "segments").iterdir()]
        assert len(kept) == 1
        assert len([p for p in archive.iterdir() if not p.name.startswith(".")]) == 2

    async def test_one_daemon_per_crawl_dir(self, tmp_path, three_hosts, start_daemon):
        """A second daemon on the same crawl_dir refuses to start, naming the first one's pid."""
        a, _b, _c = three_hosts
        seed(tmp_path, "a.txt", a.url("/"))
        first = await start_daemon(*daemon_args(tmp_path), cwd=tmp_path)
        await first.wait_event("daemon.recovered")
        second = await start_daemon(*daemon_args(tmp_path), cwd=tmp_path)
        assert await second.wait_exit() == 1
        assert any(f"pid {first.proc.pid}" in line for line in second.other_lines)
        first.signal(signal.SIGINT)
        assert await first.wait_exit() == 0


class TestOverlap:
    async def test_next_segment_starts_while_a_slow_host_finishes_and_hosts_never_overlap(
            self, tmp_path, three_hosts, start_daemon):
        """While a slow host ends a segment, the next one (without that host) is already fetching; politeness holds."""
        a, b, c = three_hosts
        for server in three_hosts:
            write_site(Path(server.root), 0)
        a.delay = 1.0
        seed(tmp_path, "abc.txt", a.url("/"), b.url("/"), c.url("/"))
        args = daemon_args(tmp_path, "-D", "generate.top_n=2", "-D", "daemon.max_cycles=2",
                           "-D", "fetcher.per_host_concurrency=1")
        daemon = await start_daemon(*args, cwd=tmp_path)
        assert await daemon.wait_exit() == 0
        overlap = daemon.find("daemon.overlap")
        assert overlap, daemon.tail(30)
        done = daemon.find("cycle.done")
        # The overlapped segment is merged as soon as it is fetched, without waiting for the slow one.
        assert [e["segment"] for e in done][0] == overlap[0]["next_segment"]
        slow_page = next(r for r in a.requests if r.path_qs == "/")
        assert c.requests and c.requests[0].started < slow_page.finished
        assert [s.max_in_flight for s in three_hosts] == [1, 1, 1]

    async def test_segments_keep_starting_and_merging_while_a_slow_segment_runs(
            self, tmp_path, three_hosts, start_daemon):
        """While a slow host holds a segment, further segments of the other hosts are generated, fetched and merged."""
        a, b, c = three_hosts
        write_site(Path(a.root), 0)
        (Path(a.root) / "robots.txt").write_text("User-agent: *\nCrawl-delay: 20\n")  # a's page waits 20 s
        others = [server.url(path) for server in (b, c) for path in ["/", *(f"/p{i}.html" for i in range(6))]]
        seed(tmp_path, "abc.txt", a.url("/"), *others)
        args = daemon_args(tmp_path, "-D", "generate.max_per_host=1", "-D", "fetcher.per_host_concurrency=1",
                           "-D", "daemon.shutdown_timeout=1s")
        daemon = await start_daemon(*args, cwd=tmp_path)
        first = await daemon.wait_event("fetch.start")
        await daemon.wait_for(lambda _e: len(fetched_on(b)) + len(fetched_on(c)) == 2 * ALL_PAGES, "b and c crawled")
        # The first segment holds a, b and c's first URLs; each later one b's and c's next (max_per_host=1).
        await daemon.wait_for(lambda e: len(daemon.find("cycle.done")) >= ALL_PAGES - 1, "their segments merged")
        assert a.paths() == ["/robots.txt"]
        assert first["segment"] not in {e["segment"] for e in daemon.find("cycle.done")}
        assert len(daemon.find("daemon.overlap")) >= ALL_PAGES - 1
        assert b.max_in_flight == c.max_in_flight == 1
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0


def metric(text: str, name: str) -> float:
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + " ")]
    return values[0] if values else 0.0


def due_in(idle: dict) -> float:
    """Seconds from now to the ``next_due`` of a ``daemon.idle`` event."""
    return (datetime.strptime(idle["next_due"], "%Y-%m-%dT%H:%M:%SZ") - utc_now()).total_seconds()


class TestWake:
    async def test_seed_file_dropped_into_an_idle_daemon_is_fetched_at_once(self, tmp_path, three_hosts,
                                                                          start_daemon):
        """The seeds folder is watched: a new file is fetched long before daemon.idle_sleep (10 min here) is over.

        Each segment is generated once, after the merge before it: the hosts a fetch frees as it ends have
        nothing due, so they run no generate, and the daemon goes idle after one generate that found nothing.
        """
        a, _b, c = three_hosts
        seed(tmp_path, "a.txt", a.url("/"))
        daemon = await start_daemon(*daemon_args(tmp_path, "-D", "daemon.idle_sleep=10m"), cwd=tmp_path)
        idle = await daemon.wait_event("daemon.idle", reason="nothing due")
        assert idle["sleep_s"] == 600 and due_in(idle) > 86400  # the pages' refetch, db.fetch_interval away
        assert len(daemon.find("generate.done")) == len(daemon.find("cycle.done")) == 3
        assert len(daemon.find("generate.empty")) == 1
        mark = len(daemon.events)
        seed(tmp_path, "c.txt", c.url("/"))
        await daemon.wait_for(lambda _e: c.requests, "the server of the new seed to see a request")
        woke = await daemon.wait_event("daemon.wake", after=mark)
        assert woke["reasons"] == ["seeds"] and woke["seeds_injected"] == ["c.txt"]
        await daemon.wait_event("daemon.idle", after=mark, reason="nothing due")
        assert len(fetched_on(c)) == ALL_PAGES
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0

    async def test_idle_daemon_generates_only_when_something_changed(self, tmp_path, three_hosts, start_daemon):
        """Waking every daemon.idle_sleep with nothing changed runs no generate (counted); SIGHUP runs one."""
        a, _b, _c = three_hosts
        seed(tmp_path, "a.txt", a.url("/"))
        daemon = await start_daemon(*daemon_args(tmp_path), cwd=tmp_path)  # daemon.idle_sleep 0.2 s
        port = await daemon.port()
        await daemon.wait_event("daemon.idle", reason="nothing due")
        mark = len(daemon.events)
        skipped = 'crawler_generate_skipped_total{reason="idle_sleep"}'
        # The total also counts the looks skipped while the first segment was fetched (before the
        # "nothing due" generate, after which the wake event counts afresh): count from here.
        _status, _ctype, text = await http_get(port, "/metrics")
        before = metric(text, skipped)
        for _ in range(300):
            _status, _ctype, text = await http_get(port, "/metrics")
            if metric(text, skipped) >= before + 3:
                break
            await asyncio.sleep(0.1)
        assert metric(text, skipped) >= before + 3, text
        assert metric(text, 'crawler_generate_runs_total{found="nothing"}') == 1
        assert not [e for e in daemon.events[mark:] if e.get("event", "").startswith("generate.")]
        mark = len(daemon.events)
        daemon.signal(signal.SIGHUP)
        woke = await daemon.wait_event("daemon.wake", after=mark)
        assert woke["reasons"] == ["reload"] and woke["skipped"]["idle_sleep"] >= 3
        await daemon.wait_event("generate.empty", after=mark)
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0

    async def test_idle_daemon_wakes_when_the_next_url_comes_due(self, tmp_path, three_hosts, start_daemon):
        """Idle with a refetch a few seconds ahead, the daemon sleeps until then (not idle_sleep) and refetches."""
        a, _b, _c = three_hosts
        write_site(Path(a.root), 0)
        seed(tmp_path, "a.txt", a.url("/"))
        args = daemon_args(tmp_path, "-D", "daemon.idle_sleep=10m", "-D", "db.fetch_interval=3s")
        daemon = await start_daemon(*args, cwd=tmp_path)
        idle = await daemon.wait_event("daemon.idle", reason="nothing due")
        assert idle["sleep_s"] <= 3 and due_in(idle) <= 3
        mark = len(daemon.events)
        woke = await daemon.wait_event("daemon.wake", after=mark)
        assert woke["reasons"] == ["due"]
        await daemon.wait_for(lambda _e: a.paths().count("/") == 2, "the page fetched again")
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0
