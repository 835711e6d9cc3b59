"""The daemon's pieces on their own: listen addresses, metric labels, rates, host tracking, reload, seeds, pruning."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from crawler.config import CrawlerConfig, FetcherConfig, load_config
from crawler.daemon.endpoint import parse_listen
from crawler.daemon.overlap import HostTracker, in_tail
from crawler.daemon.reload import ConfigSource
from crawler.daemon.retention import prune_segments
from crawler.daemon.seeds import SeedWatcher
from crawler.daemon.status import RateWindow
from crawler.errors import ConfigError
from crawler.fetcher.events import FetchDone
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
