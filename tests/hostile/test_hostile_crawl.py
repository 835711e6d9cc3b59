"""Crawling the hostile web with the default config: it ends in time, fetches every normal page,
obeys robots.txt, keeps traps bounded, stays within a memory bound and records every failure with its kind.

One crawl (module fixture) is shared by the tests below; each checks one promise.
The only settings changed from the defaults are the ones a loopback test needs
(``http.private_allowlist``, ``http.resolve`` pins, short timeouts) and the two
limits under test, stated here: ``fetcher.time_limit`` and ``generate.max_per_host``.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from urllib.parse import urlsplit

import duckdb
import pytest

from crawler.config import UrlsConfig
from crawler.urls.filters import UrlFilters
from tests.hostile.crawl import CrawlRun, crawl_hostile
from tests.hostile.web import (
    CONCAT_START,
    GROW_START,
    PINNED_PRIVATE,
    PRIVATE_LITERAL,
    REPEAT_START,
    UNRESOLVABLE,
)

ROUNDS = 3
TIME_LIMIT = 8.0  # fetcher.time_limit per round (seconds)
TIMEOUT_TOTAL = 3.0  # http.timeout.total, from HostileWeb.crawl_args
MAX_PER_HOST = 8  # generate.max_per_host
# A round is its fetch (at most the time limit, plus one last request) and its jobs; the margin is startup.
WALL_LIMIT = ROUNDS * (TIME_LIMIT + TIMEOUT_TOTAL + 5) + 15
# Peak RSS of the crawl process; content_limit (8 MiB) caps what one page can take, raw and decoded (a
# bomb's compressed bytes are archived up to the limit too, since WARC-Truncated marks only a cut payload).
# The peak depends on how many such pages are in flight at once: 358-415 MB in runs of this file alone,
# 606 MB once in a full-suite run. A bomb read without the cap would take gigabytes.
RSS_LIMIT_MB = 720
CONTENT_LIMIT = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> CrawlRun:
    crawl_dir = tmp_path_factory.mktemp("hostile")
    extra = ["-D", f"fetcher.time_limit={TIME_LIMIT}", "-D", f"generate.max_per_host={MAX_PER_HOST}"]
    return asyncio.run(crawl_hostile(crawl_dir, extra, ROUNDS, timeout=WALL_LIMIT + 60))


@pytest.fixture(scope="module")
def fetched(run) -> dict[str, dict]:
    """URL -> its latest fetcher row over all segments."""
    latest: dict[str, dict] = {}
    for row in sorted(run.rows("fetcher"), key=lambda r: r["fetch_time"]):
        latest[row["url"]] = row
    return latest


def _path(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


class TestEndsInTime:
    def test_crawl_exits_cleanly_within_its_limit(self, run):
        """The crawl exits 0, with no internal error logged, within rounds x (time limit + one timeout) + startup."""
        assert run.code == 0, run.stderr[-2000:]
        assert "internal_error" not in run.stderr and "fetch.bug" not in run.stderr
        assert run.elapsed < WALL_LIMIT

    def test_peak_memory_is_bounded(self, run):
        """Gzip bomb, 20 MB page, endless body and 5 MB robots.txt keep the crawl's peak RSS under the bound."""
        assert run.max_rss_mb < RSS_LIMIT_MB


class TestNormalPages:
    def test_every_normal_page_is_fetched(self, run, fetched):
        """Every normal page next to the hostile ones is fetched with status success."""
        missing = [u for u in run.web.normal_pages if fetched.get(u, {}).get("status") != "success"]
        # On failure, what the crawl recorded for every URL of the missing pages' hosts, to tell why.
        hosts = {urlsplit(u).netloc for u in missing}
        seen = {u: (r["status"], r["reason"], str(r["fetch_time"])) for u, r in fetched.items()
                if urlsplit(u).netloc in hosts}
        assert missing == [], seen

    def test_nothing_is_requested_from_robots_disallowed_paths(self, run, fetched):
        """No server saw a request for a path its robots.txt disallows; those URLs are recorded robots_denied."""
        for role, prefix in run.web.disallowed:
            assert [p for p in run.web.requested(role) if p.startswith(prefix)] == []
        denied = [u for u, r in fetched.items() if "/private/" in u]
        assert denied and all(fetched[u]["status"] == "robots_denied" for u in denied)

    def test_unanswered_robots_txt_blocks_the_host(self, run, fetched):
        """A robots.txt that never answers times out; the host's pages are recorded retry and never requested."""
        assert run.web.requested("robots_slow") == ["/robots.txt"]
        row = fetched[run.web.url("robots_slow", "/")]
        assert row["status"] == "retry" and row["reason"] == "robots.txt unreachable: timeout"


class TestTrapsBounded:
    def test_every_known_url_passes_the_url_limits(self, run):
        """No URL in the crawl database is longer than urls.max_length or repeats a path segment too often."""
        filters = UrlFilters(UrlsConfig())
        known = _webdb_urls(run)
        assert [u for u in known if filters.check(u) is not None] == []

    def test_traps_run_into_their_limits(self, run):
        """The growing, repeating and concatenating traps link past the limits; those links never enter the db."""
        known = _webdb_urls(run)
        outlinks = {o["url"] for r in run.rows("parse_data") for o in (r["outlinks"] or [])}
        over = [run.web.url("grow", "/grow?q=" + "g" * 2400), run.web.url("repeat", REPEAT_START + "a/b/"),
                run.web.url("concat", CONCAT_START + "/page.html/")]
        assert run.web.url("grow", GROW_START) in known
        for url in over:
            assert url in outlinks and url not in known, url

    def test_depth_stops_at_max_path_depth_and_the_calendar_grows_one_step_per_round(self, run):
        """Infinite depth ends at urls.max_path_depth (followed in the round: the same URLs, sooner); the
        infinite calendar, a query walk never followed in the round, advances at most one link per round."""
        known = _webdb_urls(run)
        depths = [u for u in known if "/depth/" in u]
        years = [int(u.rsplit("=", 1)[1]) for u in known if "/cal?year=" in u]
        # Round 1 fetches the root, which links to d1 and year 2000; each later round adds one year.
        assert 1 + max(len(re.findall(r"/d\d+", u)) for u in depths) <= UrlsConfig().max_path_depth
        assert min(years) >= 2000 - (ROUNDS - 1) and max(years) <= 2000 + (ROUNDS - 1)

    def test_no_segment_holds_more_than_max_per_host(self, run):
        """The facet explosion is cut by generate.max_per_host: no host has more entries in one fetchlist."""
        per_host = Counter((r["segment"], r["host"]) for r in _fetchlists(run))
        assert per_host and max(per_host.values()) <= MAX_PER_HOST
        shop = sum(1 for r in _fetchlists(run) if "/shop" in r["url"])
        assert shop <= MAX_PER_HOST * ROUNDS


# url role, path -> (status, reason fragment): the kind each failure is recorded with in fetcher/.
EXPECTED = [
    ("hang", "/page", "retry", "timeout:"),
    ("trickle", "/page", "retry", "timeout:"),
    ("reset", "/page", "retry", "protocol:"),
    ("bad_header", "/page", "retry", "protocol:"),
    ("bad_status", "/page", "retry", "protocol:"),
    ("huge_header", "/page", "retry", "protocol:"),
    ("endless_headers", "/page", "retry", "protocol:"),
    ("busy", "/b0", "retry", "429"),
    ("loop", "/loop/2", "redirect_temp", "redirect loop"),
    ("chain", "/chain/5", "redirect_perm", "http.max_redirects"),
    ("escape", "/to-file", "gone", "unsupported scheme file"),
    ("escape", "/to-ip", "redirect_temp", "302"),
]


class TestFailuresRecorded:
    @pytest.mark.parametrize(("role", "path", "status", "reason"), EXPECTED)
    def test_failure_kind_in_segment(self, run, fetched, role, path, status, reason):
        """Each hostile server's page is recorded with the status and failure kind it deserves."""
        row = fetched[run.web.url(role, path)]
        assert row["status"] == status and reason in row["reason"], row

    def test_every_unsuccessful_row_says_why(self, fetched):
        """Every fetcher row that brought no page has a non-empty reason."""
        assert [u for u, r in fetched.items() if r["status"] != "success" and not r["reason"]] == []

    def test_flaky_server_errors_are_retries(self, run, fetched):
        """500 on every second request: half the pages are fetched, the rest recorded retry with the 500."""
        rows = [fetched[run.web.url("flaky", f"/f{i}")] for i in range(4)]
        assert {r["status"] for r in rows} == {"success", "retry"}
        assert all(r["reason"].startswith("500") for r in rows if r["status"] == "retry")

    def test_oversized_bodies_are_truncated_at_the_limit(self, run, fetched):
        """The gzip bomb, the 20 MB page and the endless body stop at http.content_limit, flagged truncated."""
        for role, path in (("bomb", "/bomb"), ("big", "/big"), ("endless", "/endless")):
            row = fetched[run.web.url(role, path)]
            assert row["status"] == "success" and row["truncated"] and row["content_length"] <= CONTENT_LIMIT

    def test_bad_charsets_and_binary_pages_parse_without_failing(self, run):
        """Invalid charsets still parse to text; random bytes served as text/html are recorded unparsed."""
        parsed = {r["url"]: r for r in run.rows("parse_data")}
        for name in ("unknown", "lie", "meta"):
            assert parsed[run.web.url("charset", f"/{name}")]["parse_status"] == "success"
        assert parsed[run.web.url("binary", "/binary")]["parse_status"] == "unparsed"


class TestNothingPrivate:
    def test_private_addresses_are_refused(self, run, fetched):
        """A link or redirect to a private IP, or to a name pinned to one, is refused as blocked_address."""
        for url in (PRIVATE_LITERAL, f"http://{PINNED_PRIVATE}/", f"http://{PINNED_PRIVATE}/secret"):
            row = fetched[url]
            assert row["status"] == "failed" and row["reason"].startswith("blocked_address:"), row

    def test_unresolvable_host_is_a_dns_failure(self, fetched):
        """A host whose name does not resolve is recorded retry with the dns kind."""
        row = fetched[f"http://{UNRESOLVABLE}/"]
        assert row["status"] == "retry" and "dns" in row["reason"]

    def test_file_links_never_become_urls(self, run):
        """A page's file:///etc/passwd link and a redirect to it are never queued nor fetched."""
        assert [u for u in _webdb_urls(run) if not u.startswith("http")] == []
        assert [u for u in (r["url"] for r in run.rows("fetcher")) if not u.startswith("http")] == []


def _webdb_urls(run: CrawlRun) -> set[str]:
    current = (run.crawl_dir / "webdb" / "CURRENT").read_text().strip()
    glob = str(run.crawl_dir / "webdb" / current / "pages" / "*.parquet")
    return {r[0] for r in duckdb.connect().execute(f"SELECT url FROM '{glob}'").fetchall()}


def _fetchlists(run: CrawlRun) -> list[dict]:
    glob = str(run.crawl_dir / "segments" / "*" / "fetchlist" / "*.parquet")
    cur = duckdb.connect().execute(f"SELECT filename AS segment, host, url FROM read_parquet('{glob}', filename = true)")
    return [{"segment": s.split("/fetchlist/")[0], "host": h, "url": u} for s, h, u in cur.fetchall()]
