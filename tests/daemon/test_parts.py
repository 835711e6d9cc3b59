"""The daemon's pieces on their own: listen addresses, metric labels, rates, host tracking, reload, seeds, pruning."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import datetime, timedelta

import pytest
from watchfiles import Change

from crawler.config import CrawlerConfig, FetcherConfig, load_config
from crawler.daemon.endpoint import parse_listen
from crawler.daemon.outlook import webdb_outlook
from crawler.daemon.overlap import HostTracker, in_tail
from crawler.daemon.reload import ConfigSource
from crawler.daemon.retention import prune_segments
from crawler.daemon.seeds import SeedWatcher
from crawler.daemon.status import RateWindow
from crawler.daemon.wake import Outlook, Wake, utc_now
from crawler.daemon.watch import is_seed_change, watch_seeds
from crawler.errors import ConfigError
from crawler.fetcher.events import FetchDone
from crawler.jobs.generate import generate
from crawler.jobs.inject import inject
from crawler.metrics import Metrics, status_label
from crawler.segments.layout import Segment
from crawler.webdb.store import VersionedStore


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Log:
    """Collects log calls as (event, fields)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def __getattr__(self, level):
        return lambda event, **fields: self.events.append((event, fields))


def done(host: str, http_status: int | None = 200, error_kind: str | None = None, status: str = "success"):
    return FetchDone(url=f"http://{host}/", host=host, status=status, http_status=http_status,
                     error_kind=error_kind, bytes=100 if http_status else 0, elapsed=0.05)


class TestListen:
    @pytest.mark.parametrize(("listen", "expected"), [
        ("127.0.0.1:9108", ("127.0.0.1", 9108)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("[::1]:9108", ("::1", 9108)),
        ("localhost:80", ("localhost", 80)),
    ])
    def test_host_and_port(self, listen, expected):
        """HOST:PORT and [IPv6]:PORT are split into host and port."""
        assert parse_listen(listen) == expected

    @pytest.mark.parametrize("listen", ["9108", "127.0.0.1", "127.0.0.1:http", ":9108", "127.0.0.1:70000"])
    def test_bad_values_name_the_key(self, listen):
        """Anything else is a config error naming metrics.listen and the value."""
        with pytest.raises(ConfigError, match=r"metrics\.listen = "):
            parse_listen(listen)


class TestMetrics:
    @pytest.mark.parametrize(("event", "label"), [
        (done("a", 200), "2xx"), (done("a", 404, status="gone"), "4xx"), (done("a", 503, status="retry"), "5xx"),
        (done("a", None, "timeout", "retry"), "timeout"), (done("a", None, None, "robots_denied"), "robots_denied"),
    ])
    def test_status_label(self, event, label):
        """Pages are counted by HTTP status class, or by failure kind when no response came back."""
        assert status_label(event) == label

    def test_events_feed_the_contract_metric_names(self):
        """Fetch events become the DESIGN section 6 metrics in Prometheus text format."""
        metrics = Metrics()
        metrics.fetch_done(done("a"))
        metrics.fetch_done(done("b", None, "dns", "retry"))
        text = metrics.render().decode()
        assert 'crawler_pages_fetched_total{status="2xx"} 1.0' in text
        assert 'crawler_pages_fetched_total{status="dns"} 1.0' in text
        assert 'crawler_fetch_errors_total{kind="dns"} 1.0' in text
        assert "crawler_bytes_fetched_total 100.0" in text
        assert "crawler_fetch_duration_seconds_count 2.0" in text
        for name in ("crawler_queued_entries", "crawler_active_hosts", "crawler_webdb_pages",
                     "crawler_cycle_duration_seconds"):
            assert name in text


    def test_outlinks_over_cap_counts_by_the_key_that_cut(self):
        """Each updatedb's cut adds to crawler_outlinks_over_cap_total, by cap; both show from the start."""
        metrics = Metrics()
        text = metrics.render().decode()
        assert 'crawler_outlinks_over_cap_total{cap="db.max_outlinks"} 0.0' in text
        assert 'crawler_outlinks_over_cap_total{cap="sitemap.max_urls"} 0.0' in text
        metrics.outlinks_cut({"outlinks": 50, "sitemap_urls": 0, "pages": 1})
        metrics.outlinks_cut({"outlinks": 2, "sitemap_urls": 30, "pages": 2})
        text = metrics.render().decode()
        assert 'crawler_outlinks_over_cap_total{cap="db.max_outlinks"} 52.0' in text
        assert 'crawler_outlinks_over_cap_total{cap="sitemap.max_urls"} 30.0' in text


class TestRateWindow:
    def test_rate_counts_whole_seconds_in_the_window(self):
        """pages/s averages the last whole seconds and forgets older ones."""
        clock = FakeClock()
        rate = RateWindow(window=10, clock=clock)
        for _ in range(50):
            rate.add()
        clock.now += 1
        assert rate.rate() == 5.0
        clock.now += 20
        assert rate.rate() == 0.0


class TestHostTracker:
    def test_tail_when_the_hosts_left_cannot_keep_workers_busy(self):
        """The tail starts once the running fetches' hosts with work x per-host limit drop below the concurrency."""
        cfg = FetcherConfig(concurrency=3, per_host_concurrency=1, min_delay=0)
        freed: list[tuple[str, float]] = []
        clock = FakeClock()
        first = HostTracker(Counter({"a": 2, "b": 1}), cfg, clock=clock,
                            on_change=lambda host, free_at: freed.append((host, free_at)))
        second = HostTracker(Counter({"c": 1}), cfg)
        assert not in_tail([first, second], cfg)
        first.fetch_done(done("a"))
        assert not in_tail([first, second], cfg) and not freed
        first.fetch_done(done("b"))
        assert in_tail([first, second], cfg) and freed == [("b", clock.now)]
        clock.now += 1
        assert first.busy_hosts() | second.busy_hosts() == {"a", "c"}

    def test_hosts_stay_busy_for_their_delay_after_the_last_request(self):
        """A host that just finished is still excluded until min_delay has passed (politeness across fetches)."""
        clock = FakeClock()
        tracker = HostTracker(Counter({"a": 1, "b": 1}), FetcherConfig(min_delay=2.0), clock=clock)
        tracker.fetch_done(done("b"))
        assert tracker.busy_hosts() == {"a", "b"}
        clock.now += 3
        assert tracker.busy_hosts() == {"a"}


class TestReload:
    def test_changed_keys_and_restart_keys_kept(self, tmp_path):
        """A reload lists changed keys; crawl_dir and metrics.listen keep their old value until a restart."""
        path = tmp_path / "config.yaml"
        path.write_text("fetcher:\n  per_host_concurrency: 1\n")
        source = ConfigSource(path, ["daemon.idle_sleep=5"], load_config(path, ["daemon.idle_sleep=5"]))
        path.write_text("crawl_dir: elsewhere\nmetrics:\n  listen: ''\nfetcher:\n  per_host_concurrency: 3\n")
        reload = source.reload()
        assert reload.changed == ["fetcher.per_host_concurrency"]
        assert reload.restart_required == ["crawl_dir", "metrics.listen"]
        assert source.current.crawl_dir == "." and source.current.metrics.listen == "127.0.0.1:9108"
        assert source.current.fetcher.per_host_concurrency == 3
        assert source.current.daemon.idle_sleep == 5.0  # the -D overrides are applied again

    def test_invalid_config_keeps_the_old_one(self, tmp_path):
        """An invalid file raises a config error naming the key, and the current config stays."""
        path = tmp_path / "config.yaml"
        path.write_text("fetcher:\n  concurrency: 4\n")
        source = ConfigSource(path, [], load_config(path))
        path.write_text("fetcher:\n  concurrency: lots\n")
        with pytest.raises(ConfigError, match="fetcher.concurrency"):
            source.reload()
        assert source.current.fetcher.concurrency == 4


class TestSeeds:
    def test_each_file_is_injected_once_by_name_and_content(self, tmp_path):
        """A seed file is injected once; the same file with new content is injected again."""
        seeds = tmp_path / "seeds"
        seeds.mkdir()
        cfg = CrawlerConfig(crawl_dir=str(tmp_path / "crawl"), daemon={"seeds": str(seeds)})
        watcher = SeedWatcher(tmp_path / "crawl" / "state.json")
        log = Log()
        (seeds / "one.txt").write_text("http://a.test/\n")
        assert watcher.inject_new(cfg, log) == ["one.txt"]
        assert watcher.inject_new(cfg, log) == []
        (seeds / "one.txt").write_text("http://a.test/\nhttp://b.test/\n")
        (seeds / ".hidden").write_text("http://c.test/\n")
        assert watcher.inject_new(cfg, log) == ["one.txt"]
        state = json.loads((tmp_path / "crawl" / "state.json").read_text())
        assert list(state["seeds"]) == ["one.txt"]
        assert VersionedStore(tmp_path / "crawl" / "webdb").require_current().number == 2

    def test_unreadable_state_is_a_warning_not_a_crash(self, tmp_path):
        """A corrupt state file is reported by name; the seeds are injected again, which changes nothing."""
        seeds = tmp_path / "seeds"
        seeds.mkdir()
        (seeds / "one.txt").write_text("http://a.test/\n")
        state = tmp_path / "crawl" / "state.json"
        state.parent.mkdir()
        state.write_text("{not json")
        cfg = CrawlerConfig(crawl_dir=str(tmp_path / "crawl"), daemon={"seeds": str(seeds)})
        log = Log()
        assert SeedWatcher(state).inject_new(cfg, log) == ["one.txt"]
        assert ("daemon.state_unreadable", {"file": str(state), "error": log.events[0][1]["error"]}) in log.events


class TestPrune:
    def _segments(self, root, names):
        for name in names:
            (root / name / "fetchlist").mkdir(parents=True)
        return [Segment(root / n) for n in names]

    def test_only_merged_segments_beyond_keep_are_removed(self, tmp_path):
        """The newest keep_segments merged segments stay; unmerged ones are never touched."""
        names = ["20260101T000000000Z", "20260102T000000000Z", "20260103T000000000Z", "20260104T000000000Z"]
        self._segments(tmp_path, names)
        removed = prune_segments(tmp_path, names[:3], keep=1, archive_dir="", log=Log())
        assert removed == names[:2]
        assert sorted(p.name for p in tmp_path.iterdir()) == names[2:]

    def test_archive_moves_instead_of_deleting(self, tmp_path):
        """With daemon.archive_dir the pruned segments are moved there whole."""
        names = ["20260101T000000000Z", "20260102T000000000Z"]
        self._segments(tmp_path / "segments", names)
        prune_segments(tmp_path / "segments", names, keep=1, archive_dir=str(tmp_path / "archive"), log=Log())
        assert (tmp_path / "archive" / names[0] / "fetchlist").is_dir()
        assert [p.name for p in (tmp_path / "segments").iterdir()] == [names[1]]

    def test_keep_zero_keeps_everything(self, tmp_path):
        """keep_segments 0 means keep all."""
        names = ["20260101T000000000Z", "20260102T000000000Z"]
        self._segments(tmp_path, names)
        assert prune_segments(tmp_path, names, keep=0, archive_dir="", log=Log()) == []


NOON = datetime(2026, 1, 1, 12, 0, 0)


def wake_at(clock: FakeClock, wall: list[datetime], outlook: Outlook, reasons: set[str] = frozenset()) -> Wake:
    """A Wake right after a generate that saw ``outlook``, on fake clocks."""
    wake = Wake(clock=clock, wall=lambda: wall[0])
    wake.take()
    wake.generated(outlook)
    for reason in reasons:
        wake.note(reason)
    return wake


class TestWake:
    @pytest.mark.parametrize(("waiting", "held_elsewhere", "pending", "free_in", "reasons", "skipped", "woken"), [
        # A freed host with nothing due cannot change generate's answer: counted, nobody woken.
        (frozenset({"b"}), False, set(), 0.0, set(), {"host_freed": 1}, False),
        # One with due URLs can, at once or once its delay after the last request has passed.
        (frozenset({"a"}), False, set(), 0.0, {"host_freed"}, {}, True),
        (frozenset({"a"}), False, set(), 2.0, set(), {}, True),
        # Still held by another running fetch: that fetch frees it later.
        (frozenset({"a"}), True, set(), 0.0, set(), {"host_freed": 1}, False),
        # Not known which hosts wait (no generate yet): any freed host may matter.
        (None, False, set(), 0.0, {"host_freed"}, {}, True),
        # Generate is pending anyway, held back while fetches fill every worker: look whether it may run now.
        (frozenset(), False, {"merged"}, 0.0, {"merged"}, {}, True),
    ])
    def test_host_freed(self, waiting, held_elsewhere, pending, free_in, reasons, skipped, woken):
        """Only a freed host that has due URLs wakes the loop to generate; the others are counted as skipped."""
        clock = FakeClock()
        wake = wake_at(clock, [NOON], Outlook(1, None, waiting), pending)
        wake.host_freed("a", clock.now + free_in, held_elsewhere)
        assert (wake.reasons, dict(wake.skipped), wake.event.is_set()) == (reasons, skipped, woken)

    def test_deadlines_become_reasons_when_they_pass(self):
        """The next due URL and a waiting host's delay are deadlines: the wait ends at the first, which is a reason."""
        clock, wall = FakeClock(), [NOON]
        wake = wake_at(clock, wall, Outlook(1, NOON + timedelta(seconds=30), frozenset({"a"})))
        assert wake.until_deadline() == 30.0
        wake.host_freed("a", clock.now + 5, False)
        assert wake.until_deadline() == 5.0 and not wake.reasons
        clock.now += 5
        wall[0] += timedelta(seconds=5)
        assert wake.fire_deadlines() and wake.reasons == {"host_freed"}
        assert wake.until_deadline() == 25.0
        wall[0] += timedelta(seconds=25)
        assert wake.fire_deadlines() and wake.reasons == {"host_freed", "due"}
        assert wake.until_deadline() is None and not wake.fire_deadlines()

    def test_take_starts_afresh_and_more_due_is_a_reason(self):
        """A generate takes the reasons and skips; one that left due URLs of free hosts makes the next one due."""
        wake = Wake()
        wake.skip("idle_sleep")
        assert wake.take() == ({"start"}, Counter({"idle_sleep": 1}))
        assert wake.take() == (set(), Counter())
        wake.generated(Outlook(3, None, frozenset(), more=True))
        assert wake.reasons == {"more_due"}

    async def test_wait_returns_false_only_when_the_longest_sleep_passed(self):
        """The wait ends early on an event or the stop event (True), else after ``longest`` (False)."""
        stop = asyncio.Event()
        wake = Wake()
        wake.looking()
        assert await wake.wait(stop, 0.01) is False
        wake.changed("seeds")
        assert await wake.wait(stop, 60) is True
        wake.looking()
        stop.set()
        assert await wake.wait(stop, 60) is True

    @pytest.mark.parametrize(("change", "name", "counts"), [
        (Change.added, "new.txt", True), (Change.modified, "new.txt", True), (Change.deleted, "new.txt", False),
        (Change.added, ".new.txt.tmp", False), (Change.modified, ".hidden", False),
    ])
    def test_seed_folder_changes_that_count(self, tmp_path, change, name, counts):
        """Added or modified seed files wake the daemon; deletions and hidden (temporary) names do not."""
        assert is_seed_change(change, str(tmp_path / name)) is counts


class TestWatch:
    async def test_the_folder_it_is_given_is_watched_when_it_appears_and_when_it_moves(self, tmp_path):
        """Its appearance and a seed file renamed into it wake the daemon; a reload may name another folder."""
        folder = [tmp_path / "seeds"]
        woken, stop = asyncio.Event(), asyncio.Event()

        async def woken_by(what: str, timeout: float = 30) -> bool:
            try:
                await asyncio.wait_for(woken.wait(), timeout)
            except TimeoutError:
                return False
            woken.clear()
            return True

        def drop(name: str) -> None:
            (folder[0] / f".{name}.tmp").write_text("http://a.test/\n")
            (folder[0] / f".{name}.tmp").rename(folder[0] / name)

        watcher = asyncio.create_task(watch_seeds(lambda: folder[0], woken.set, stop, Log()))
        try:
            await asyncio.sleep(0)  # the watcher has looked once: no folder yet
            folder[0].mkdir()
            assert await woken_by("the folder appearing")
            drop("first.txt")
            assert await woken_by("a seed file")
            (tmp_path / "moved").mkdir()
            folder[0] = tmp_path / "moved"
            # The watcher takes up the new folder within a second; a file dropped before that is found by the
            # daemon's next look (at the latest after daemon.idle_sleep), so drop files until one wakes it.
            for n in range(60):
                drop(f"moved-{n}.txt")
                if await woken_by("a seed file in the moved folder", 0.5):
                    break
            else:
                raise AssertionError("a seed file in the moved folder woke nobody")
        finally:
            stop.set()
            await asyncio.wait_for(watcher, 30)


class TestOutlook:
    @pytest.mark.parametrize(("top_n", "excluded", "shift", "waiting", "more", "segment"), [
        # max_per_host 1: b's second URL stays due; a, left out as busy, waits too.
        (10, {"a.test"}, 1, {"a.test", "b.test"}, False, True),
        (10, set(), 1, {"b.test"}, False, True),
        # top_n cut: b and c are due and nobody holds them, so the next generate finds something.
        (1, set(), 1, set(), True, True),
        # Nothing due yet: generate finds nothing, and the outlook says when the first URL comes due.
        (10, set(), -3600, set(), False, False),
    ])
    def test_waiting_hosts_more_due_and_next_due(self, tmp_path, top_n, excluded, shift, waiting, more, segment):
        """After a generate: which left-out hosts have due URLs, whether free hosts do, and when the next is due."""
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("http://a.test/\nhttp://b.test/\nhttp://b.test/2\nhttp://c.test/\n")
        cfg = CrawlerConfig(crawl_dir=str(tmp_path / "crawl"), generate={"top_n": top_n, "max_per_host": 1})
        inject(cfg, seeds, Log())
        now = utc_now() + timedelta(seconds=shift)
        report = generate(cfg, Log(), now, exclude_hosts=excluded or None)
        assert (report.segment is not None) is segment
        outlook = webdb_outlook(cfg, now, excluded, set(), report.segment)
        assert (outlook.waiting, outlook.more) == (waiting, more)
        assert outlook.version == 1
        assert (outlook.next_due is not None) is (shift < 0)
        assert outlook.next_due is None or now < outlook.next_due <= utc_now()
