"""Politeness across fetches, origins and restarts, judged from the servers' own request times."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import structlog
from aiohttp import web

from crawler.config import FetcherConfig
from crawler.fetcher.politeness import Politeness
from crawler.fetcher.politeness_file import PolitenessFile, QueueRecord
from crawler.fetcher.service import fetch_segment
from crawler.protocols.base import request_clock
from crawler.protocols.http import HttpProtocol
from tests.fetcher.conftest import fetch, make_cfg, make_segment, page, robots, rows_by_url

# The server stamps a request when its handler runs, which under load can lag the crawler's send by a few
# ms while the next request is stamped at once: a gap may read that much short of the delay kept.
CLOCK_SLACK = 0.02


async def fetch_in(crawl_dir: Path, run: str, urls: list[str], *overrides: str):
    """One `crawler fetch` of a fresh segment of ``urls`` in the crawl directory ``crawl_dir``."""
    cfg = make_cfg(crawl_dir, *overrides)
    seg = make_segment(crawl_dir / "runs" / run, urls)
    with structlog.testing.capture_logs() as logs:
        report = await fetch_segment(cfg, seg, structlog.get_logger())
    return report, rows_by_url(seg), logs


def start_gaps(server, include_robots: bool = True) -> list[float]:
    starts = sorted(h.started for h in server.hits if include_robots or h.path != "/robots.txt")
    return [b - a for a, b in zip(starts, starts[1:], strict=False)]


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TestAcrossFetches:
    async def test_crawl_delay_spaces_the_first_starts_of_the_next_fetch(self, tmp_path, servers):
        """Two fetches in a row on one crawl directory, two slots per host: every start a Crawl-delay apart."""
        site = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.3\n"),
                                           **{f"/p{i}": page() for i in range(6)}})
        for run, pages in (("a", range(3)), ("b", range(3, 6))):
            _, rows, _ = await fetch_in(tmp_path, run, [site.url(f"/p{i}") for i in pages],
                                        "fetcher.per_host_concurrency=2")
            assert {r["status"] for r in rows.values()} == {"success"}
        assert len(site.hits) == 8  # robots.txt twice (a new process each time) and six pages
        assert min(start_gaps(site)) >= 0.3 - CLOCK_SLACK

    async def test_min_delay_counts_from_the_last_start_of_the_previous_fetch(self, tmp_path, servers):
        """The next fetch's first request to a host waits min_delay after the previous fetch's last one."""
        site = await servers("127.0.0.1", {f"/p{i}": page() for i in range(4)})
        for run, pages in (("a", range(2)), ("b", range(2, 4))):
            await fetch_in(tmp_path, run, [site.url(f"/p{i}") for i in pages], "fetcher.min_delay=0.4")
        assert min(start_gaps(site)) >= 0.4 - CLOCK_SLACK

    async def test_robots_retry_after_holds_across_fetches(self, tmp_path, servers):
        """robots.txt answering 503 with Retry-After: 2 is not asked again before 2 s, by any later fetch."""
        async def unavailable(request):
            return web.Response(status=503, headers={"Retry-After": "2"})

        site = await servers("127.0.0.1", {"/robots.txt": unavailable, "/p": page()})
        _, rows, _ = await fetch_in(tmp_path, "a", [site.url("/p")])
        assert rows[site.url("/p")]["status"] == "retry"
        first = site.hits[0].started
        _, rows, _ = await fetch_in(tmp_path, "b", [site.url("/p")])
        assert [h.path for h in site.hits] == ["/robots.txt", "/robots.txt"]
        assert site.hits[1].started - first >= 2 - CLOCK_SLACK

    async def test_page_retry_after_over_the_cap_outlives_the_fetch(self, tmp_path, servers):
        """A 429 whose Retry-After is over max_crawl_delay: the next fetch records the host's URLs, asks nothing."""
        async def busy(request):
            return web.Response(status=429, headers={"Retry-After": "120"})

        site = await servers("127.0.0.1", {"/busy": busy, "/p": page()})
        await fetch_in(tmp_path, "a", [site.url("/busy")], "fetcher.max_crawl_delay=10")
        report, rows, _ = await fetch_in(tmp_path, "b", [site.url("/p")], "fetcher.max_crawl_delay=10")
        assert site.paths() == ["/robots.txt", "/busy"]
        assert rows[site.url("/p")]["status"] == "retry"
        assert report.dropped == {"retry_after_over_cap": 1}


class TestOrigins:
    async def test_a_dead_origin_does_not_deny_a_live_one_on_the_same_host(self, tmp_path, servers):
        """127.0.0.1:dead has no robots.txt answer; every page of 127.0.0.1:live is still fetched."""
        live = await servers("127.0.0.1", {f"/a{i}": page() for i in range(3)})
        dead = f"http://127.0.0.1:{dead_port()}"
        urls = [f"{dead}/x{i}" for i in range(2)] + [live.url(f"/a{i}") for i in range(3)]
        report, rows, _ = await fetch_in(tmp_path, "a", urls)
        assert {rows[live.url(f"/a{i}")]["status"] for i in range(3)} == {"success"}
        assert {rows[f"{dead}/x{i}"]["reason"] for i in range(2)} == {"robots.txt unreachable: connect"}
        assert live.paths()[0] == "/robots.txt"

    async def test_an_unreachable_robots_txt_counts_once_with_its_kind(self, tmp_path):
        """The origin's robots.txt failure reaches the observers (metrics) once, as its error kind."""
        class Events:
            def __init__(self):
                self.kinds = []

            def fetch_done(self, event):
                self.kinds.append(event.error_kind)

            def progress(self, event):
                pass

        dead = f"http://127.0.0.1:{dead_port()}"
        events = Events()
        seg = make_segment(tmp_path / "runs" / "a", [f"{dead}/x{i}" for i in range(3)])
        await fetch_segment(make_cfg(tmp_path), seg, structlog.get_logger(), observer=events)
        assert sorted(events.kinds, key=str) == [None, None, "connect"]

    async def test_domain_queue_keeps_each_hosts_robots_outcome(self, tmp_path, servers):
        """In domain mode, a 500 on a.example.test's robots.txt leaves b.example.test's pages fetched."""
        async def broken(request):
            return web.Response(status=500)

        a = await servers("127.0.0.2", {"/robots.txt": broken, "/p": page()})
        b = await servers("127.0.0.3", {"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.3\n"),
                                        **{f"/q{i}": page() for i in range(3)}})
        resolve = f"http.resolve={json.dumps({'a.example.test': a.host, 'b.example.test': b.host})}"
        urls = [f"http://a.example.test:{a.port}/p"] + [f"http://b.example.test:{b.port}/q{i}" for i in range(3)]
        _, rows, _ = await fetch_in(tmp_path, "a", urls, "fetcher.queue_mode=domain", resolve)
        assert rows[urls[0]]["status"] == "retry"
        assert {rows[u]["status"] for u in urls[1:]} == {"success"}
        assert b.paths()[0] == "/robots.txt"
        # One queue: once b's robots.txt gave its Crawl-delay, it spaces every later start to either host.
        starts = sorted(h.started for h in a.hits + b.hits if h.started >= b.hits[0].started)
        assert min(y - x for x, y in zip(starts, starts[1:], strict=False)) >= 0.3 - CLOCK_SLACK

    async def test_crawl_delay_over_the_cap_skips_only_that_origin(self, tmp_path, servers):
        """Two ports of one host: the one asking Crawl-delay 100 is skipped, the other fetched."""
        slow = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: *\nCrawl-delay: 100\n"), "/s": page()})
        fine = await servers("127.0.0.1", {"/f": page()})
        report, rows, _ = await fetch_in(tmp_path, "a", [slow.url("/s"), fine.url("/f")],
                                         "fetcher.max_crawl_delay=5")
        assert rows[slow.url("/s")]["reason"] == "crawl_delay_over_cap"
        assert rows[fine.url("/f")]["status"] == "success"


class TestStateFile:
    def test_saved_state_is_restored_on_the_wall_clock(self, tmp_path):
        """A start and a hold written by one process are what another process waits for."""
        path = tmp_path / "politeness.json"
        first = Politeness(FetcherConfig(min_delay=5), state_file=path)
        state = first.attach("h")
        first.dispatched(state)
        first.started(state)
        first.hold(first.attach("held"), 60)
        asyncio.run(first.save(clean=True))
        second = Politeness(FetcherConfig(min_delay=5), state_file=path)
        now = time.monotonic()
        assert second.ready_at(second.attach("h"), 1, now) > now + 4
        assert second.ready_at(second.attach("held"), 1, now) > now + 59
        assert second.ready_at(second.attach("new"), 1, now) is None

    def test_a_wall_clock_step_between_writer_and_reader_moves_no_start(self, tmp_path):
        """Written on this boot, a start is read back as the writer's monotonic stamp, whatever the wall
        clock did in between: here the writer's wall clock ran 5 s behind the reader's."""
        path = tmp_path / "politeness.json"
        started = time.monotonic()
        behind = time.time() - time.monotonic() - 5.0  # the writer's wall-minus-monotonic offset
        PolitenessFile(path).save({"h": QueueRecord(last_start=started + behind)}, clean=True, offset=behind)
        assert json.loads(path.read_text())["boot_id"]
        reader = Politeness(FetcherConfig(min_delay=3), state_file=path)
        now = time.monotonic()
        assert reader.ready_at(reader.attach("h"), 1, now) > now + 2

    def test_a_file_of_another_boot_is_read_by_the_wall_clock(self, tmp_path):
        """After a reboot the monotonic clock restarted: only the wall-clock times mean anything."""
        path = tmp_path / "politeness.json"
        PolitenessFile(path).save({"h": QueueRecord(last_start=time.time())}, clean=True, offset=-1e6)
        body = json.loads(path.read_text())
        path.write_text(json.dumps({**body, "boot_id": "another-boot"}))
        reader = Politeness(FetcherConfig(min_delay=3), state_file=path)
        now = time.monotonic()
        assert 2 < reader.ready_at(reader.attach("h"), 1, now) - now <= 3.01

    def test_after_an_unclean_end_every_key_waits_its_delay(self, tmp_path):
        """A file not marked clean (the writer was killed): even keys it does not list wait the delay."""
        path = tmp_path / "politeness.json"
        PolitenessFile(path).save({}, clean=False)
        restored = Politeness(FetcherConfig(min_delay=3), state_file=path)
        now = time.monotonic()
        assert restored.ready_at(restored.attach("unknown"), 1, now) > now + 2

    def test_writers_merge_and_expired_keys_go(self, tmp_path):
        """Two writers' keys are both kept; the latest start and hold win; long-past keys are dropped."""
        path = tmp_path / "politeness.json"
        now = time.time()
        offset = now - time.monotonic()  # one offset for both writers and the reader: no shift between them
        store = PolitenessFile(path)
        store.save({"a": QueueRecord(last_start=now - 1), "old": QueueRecord(last_start=now - 3600)}, clean=True,
                   offset=offset)
        store.save({"a": QueueRecord(last_start=now - 2, hold_until=now + 9), "b": QueueRecord(last_start=now)},
                   clean=True, offset=offset)
        queues = store.load(offset=offset).queues
        assert sorted(queues) == ["a", "b"]
        assert (queues["a"].last_start, queues["a"].hold_until) == (round(now - 1, 6), round(now + 9, 6))

    def test_an_unreadable_file_is_reported_and_ignored(self, tmp_path):
        """A corrupt politeness.json never stops a fetch: it is logged with its path and treated as empty."""
        path = tmp_path / "politeness.json"
        path.write_text("{not json")
        with structlog.testing.capture_logs() as logs:
            politeness = Politeness(FetcherConfig(), state_file=path, log=structlog.get_logger())
        assert politeness.ready_at(politeness.attach("h"), 1, time.monotonic()) is None
        assert [e["file"] for e in logs if e["event"] == "politeness.state_unusable"] == [str(path)]


class _LateReads:
    """A keep-alive HTTP server that reads requests late, as a loaded server does: a new connection's first
    request ``accept_lag`` seconds after it arrives (a late accept), and a request for a path starting with
    /late ``lag`` seconds after it arrives; others at once. ``reads``: (when it read each, its path)."""

    def __init__(self, accept_lag: float = 0.0, lag: float = 0.0) -> None:
        self.accept_lag, self.lag, self.reads = accept_lag, lag, []
        self.server: asyncio.base_events.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(self.accept_lag)
        body = b"<html>ok</html>"
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                path = head.split(b" ", 2)[1].decode()
                if path.startswith("/late"):
                    await asyncio.sleep(self.lag)
                self.reads.append((time.monotonic(), path))
                if path == "/robots.txt":  # no rules, and the next request needs a new connection
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    break
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))
                await writer.drain()
        except asyncio.IncompleteReadError:  # the client closed the connection
            pass
        finally:
            writer.close()

    def gaps(self) -> list[float]:
        """Between successive reads of pages (robots.txt is stamped by the robots cache, not this path)."""
        times = sorted(t for t, path in self.reads if path != "/robots.txt")
        return [b - a for a, b in zip(times, times[1:], strict=False)]

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


class _Stamps:
    """A ``request_clock`` that notes when each request was sent and answered."""

    def __init__(self) -> None:
        self.sent_at: list[float] = []
        self.answered_at: list[float] = []

    def sent(self) -> None:
        self.sent_at.append(time.monotonic())

    def answered(self) -> None:
        self.answered_at.append(time.monotonic())


async def _stamped_fetches(tmp_path: Path, urls: list[str]) -> list[_Stamps]:
    protocol = HttpProtocol(make_cfg(tmp_path))
    stamps = []
    try:
        for url in urls:
            stamps.append(_Stamps())
            token = request_clock.set(stamps[-1])
            try:
                await protocol.fetch(url)
            finally:
                request_clock.reset(token)
    finally:
        await protocol.aclose()
    return stamps


class TestServerSeenStart:
    async def test_a_request_is_stamped_at_its_send_and_at_its_answer(self, tmp_path, servers):
        """Each request tells request_clock once its connection is up (before the server reads it) and once
        the head of its answer is in (after), on a new connection and on a reused one alike."""
        site = await servers("127.0.0.1", {"/p": page()})
        stamps = await _stamped_fetches(tmp_path, [site.url("/p"), site.url("/p")])
        assert [(len(s.sent_at), len(s.answered_at)) for s in stamps] == [(1, 1), (1, 1)]
        assert all(s.sent_at[0] <= hit.started <= s.answered_at[0] for s, hit in zip(stamps, site.hits, strict=True))

    async def test_the_answer_stamp_is_not_before_a_late_read(self, tmp_path):
        """A server that reads a new connection's request late, and a kept-alive one's late too: each
        request's answer stamp is after the server read it, while its send stamp was before."""
        server = _LateReads(accept_lag=0.3, lag=0.3)
        async with server as origin:
            stamps = await _stamped_fetches(tmp_path, [origin + "/a", origin + "/late"])
        assert [path for _, path in server.reads] == ["/a", "/late"]  # both on one connection
        for stamp, (read, _) in zip(stamps, server.reads, strict=True):
            assert stamp.sent_at[0] < read <= stamp.answered_at[0]

    async def test_a_late_read_on_a_kept_alive_connection_still_gets_the_whole_delay(self, tmp_path):
        """The whole fetcher, one slot: /a opens a connection, then on it kept alive the server reads /late
        0.3 s after it arrives and /b at once. Counted from the sends, /late and /b were read 0.7 s apart
        for a 1 s delay."""
        server = _LateReads(lag=0.3)
        async with server as origin:
            await fetch(tmp_path, [origin + "/a", origin + "/late", origin + "/b"], "fetcher.min_delay=1",
                        "fetcher.per_host_concurrency=1", "fetcher.parse=false")
        assert [path for _, path in server.reads] == ["/robots.txt", "/a", "/late", "/b"]
        assert min(server.gaps()) >= 1.0

    async def test_a_new_connection_accepted_late_still_gets_the_whole_delay(self, tmp_path):
        """A server that accepts each connection 0.3 s late: /a (a new connection after robots.txt's closed
        one) and /b on it kept alive are read at least the delay apart."""
        server = _LateReads(accept_lag=0.3)
        async with server as origin:
            await fetch(tmp_path, [origin + "/a", origin + "/b"], "fetcher.min_delay=1",
                        "fetcher.per_host_concurrency=1", "fetcher.parse=false")
        assert len(server.reads) == 3
        assert min(server.gaps()) >= 1.0

    async def test_with_two_slots_no_request_starts_while_a_slow_one_is_out(self, tmp_path):
        """Two slots and a 1 s delay: /late is read 1.5 s after it arrives. A second request sent a delay
        after /late's send would reach the server before /late was read; it waits for /late's answer."""
        server = _LateReads(lag=1.5)
        async with server as origin:
            _, rows, _ = await fetch(tmp_path, [origin + "/late", origin + "/b", origin + "/c"],
                                  "fetcher.min_delay=1", "fetcher.per_host_concurrency=2", "fetcher.parse=false")
        assert {r["status"] for r in rows.values()} == {"success"}
        assert [path for _, path in server.reads] == ["/robots.txt", "/late", "/b", "/c"]
        assert min(server.gaps()) >= 1.0
