from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest
import structlog
from structlog.testing import capture_logs

from crawler.errors import SegmentError, StorageError
from crawler.jobs.invertlinks import invertlinks
from crawler.jobs.readdb import db_stats
from crawler.jobs.readlinkdb import inlinks_of
from crawler.jobs.sql import host_sql
from crawler.jobs.updatedb import updatedb
from crawler.models import PARSE_DATA
from crawler.segments.layout import part_name
from crawler.urls.normalize import host_of, normalize
from crawler.webdb.store import VersionedStore

from .conftest import (
    NOW,
    T0,
    T1,
    fetch,
    make_cfg,
    page,
    parse,
    read_links,
    read_pages,
    write_db,
    write_parquet,
)

LOG = structlog.get_logger()
URL = "http://site.example/page"
OLD_MODIFIED = datetime(2025, 6, 1)


def known_page(**fields):
    base = dict(
        status="fetched",
        retries=0,
        fetch_interval=1000.0,
        digest="a" * 32,
        fetch_time=T0,
        modified_time=OLD_MODIFIED,
        etag='"old"',
        score=2.0,
        http_status=200,
    )
    return page(URL, **(base | fields))


# fetch status, retries before -> webdb status, retries after, next fetch after (s), digest kept
CASES = [
    ("success", 1, "fetched", 0, 1000, False),
    ("notmodified", 1, "notmodified", 0, 1000, True),
    ("redirect_perm", 0, "redirect_perm", 0, 1000, False),
    ("redirect_temp", 0, "redirect_temp", 0, 1000, False),
    ("gone", 1, "gone", 0, 7200, True),
    ("robots_denied", 0, "gone", 0, 7200, True),
    ("failed", 0, "gone", 0, 7200, True),
    ("retry", 0, "retry", 1, 60, True),
    ("retry", 1, "retry", 2, 60, True),
    ("retry", 2, "gone", 3, 7200, True),
]


@pytest.mark.parametrize(
    ("fetch_status", "retries", "status", "retries_after", "after", "keeps_digest"), CASES
)
def test_fetch_status_transitions(
    tmp_path, make_segment, fetch_status, retries, status, retries_after, after, keeps_digest
):
    """Each fetch status moves the page as the status table says: status, retries, next fetch and digest."""
    cfg = make_cfg(tmp_path, db={"max_retries": 2, "retry_interval": 60, "max_interval": 7200})
    write_db(cfg, [known_page(retries=retries)])
    record = fetch(
        URL,
        fetch_status,
        digest="b" * 32,
        http_status=999,
        redirect_url="http://site.example/next" if fetch_status.startswith("redirect") else None,
    )
    report = updatedb(cfg, [make_segment("20260101T010000000Z", [record])], LOG, now=NOW)
    row = read_pages(cfg)[URL]
    assert row["status"] == status
    assert row["retries"] == retries_after
    assert row["next_fetch"] == T1 + timedelta(seconds=after)
    assert row["digest"] == ("a" * 32 if keeps_digest else "b" * 32)
    assert (row["fetch_time"], row["http_status"]) == (T1, 999)
    assert (row["score"], row["fetch_interval"]) == (2.0, 1000.0)
    assert report.by_status == {status: 1} and report.fetched == 1


def test_retries_exhaust_to_gone(tmp_path, make_segment):
    """A page that keeps failing with retry is retried max_retries times, then becomes gone."""
    cfg = make_cfg(tmp_path, db={"max_retries": 2})
    write_db(cfg, [known_page()])
    statuses = []
    for i in range(3):
        seg = make_segment(
            f"2026010{i + 1}T000000000Z", [fetch(URL, "retry", fetch_time=T1 + timedelta(days=i))]
        )
        updatedb(cfg, [seg], LOG, now=NOW)
        row = read_pages(cfg)[URL]
        statuses.append((row["status"], row["retries"]))
    assert statuses == [("retry", 1), ("retry", 2), ("gone", 3)]


def test_success_records_validators_and_outlink_count(cfg, make_segment):
    """A 200 stores the fetch time, HTTP status, digest, parsed Last-Modified, ETag and the outlink count."""
    write_db(cfg, [known_page()])
    record = fetch(URL, digest="c" * 32, last_modified="Sun, 06 Nov 1994 08:49:37 GMT", etag='"v2"')
    seg = make_segment("20260101T010000000Z", [record], [parse(URL, [("http://site.example/a", "a")] * 1)])
    updatedb(cfg, [seg], LOG, now=NOW)
    row = read_pages(cfg)[URL]
    assert (row["digest"], row["etag"], row["http_status"]) == ("c" * 32, '"v2"', 200)
    assert row["modified_time"] == datetime(1994, 11, 6, 8, 49, 37)
    assert row["num_outlinks"] == 1


def test_notmodified_keeps_digest_and_validators(cfg, make_segment):
    """A 304 keeps the page's digest, and its Last-Modified and ETag unless the response sent new ones."""
    write_db(cfg, [known_page()])
    updatedb(
        cfg, [make_segment("20260101T010000000Z", [fetch(URL, "notmodified", digest=None)])], LOG, now=NOW
    )
    row = read_pages(cfg)[URL]
    assert (row["status"], row["digest"], row["modified_time"], row["etag"]) == (
        "notmodified",
        "a" * 32,
        OLD_MODIFIED,
        '"old"',
    )


def test_new_urls_from_outlinks_and_redirects(cfg, make_segment):
    """Outlinks of fetched pages and redirect targets become unfetched pages due now, scored by their inlinks."""
    a, d, r = "http://a.example/", "http://d.example/", "http://r.example/"
    write_db(cfg, [page(a, score=3.0), page(d, score=1.0), page(r, score=0.5)])
    seg = make_segment(
        "20260101T010000000Z",
        [fetch(a), fetch(d), fetch(r, "redirect_perm", redirect_url="https://r.example/")],
        [
            parse(a, [("http://b.example/", "B"), ("http://c.example/x", "C"), (a, "self")]),
            parse(d, [("http://c.example/x", "C again")]),
        ],
    )
    report = updatedb(cfg, [seg], LOG, now=NOW)
    pages = read_pages(cfg)
    assert sorted(pages) == [a, "http://b.example/", "http://c.example/x", d, r, "https://r.example/"]
    new_b, new_c, new_r = pages["http://b.example/"], pages["http://c.example/x"], pages["https://r.example/"]
    assert (new_b["status"], new_b["next_fetch"], new_b["retries"], new_b["host"]) == (
        "unfetched",
        NOW,
        0,
        "b.example",
    )
    assert new_b["fetch_interval"] == cfg.db.fetch_interval
    assert new_b["score"] == pytest.approx(1.0)  # 3.0 / 3 outlinks
    assert new_c["score"] == pytest.approx(2.0)  # 3.0 / 3 + 1.0 / 1
    assert new_r["score"] == pytest.approx(0.5)  # the redirecting page's whole score
    assert pages[a]["score"] == 3.0 and pages[a]["num_outlinks"] == 3
    assert report.new_urls == 3 and report.fetched == 3
    assert report.by_status == {"fetched": 2, "redirect_perm": 1}
    assert read_links(cfg) == sorted(
        [
            (a, "http://b.example/", "B"),
            (a, "http://c.example/x", "C"),
            (a, a, "self"),
            (d, "http://c.example/x", "C again"),
        ]
    )


def test_the_version_holds_its_tables_alone(cfg, make_segment):
    """The kept outlinks staged on disk while the job runs (engine.stage) are gone from the version it publishes."""
    a = "http://a.example/"
    write_db(cfg, [page(a)])
    seg = make_segment("20260101T010000000Z", [fetch(a)], [parse(a, [("http://a.example/b", "B")])])
    updatedb(cfg, [seg], LOG, now=NOW)
    version = VersionedStore(cfg.crawl_path / "webdb").require_current().path
    assert sorted(p.name for p in version.iterdir()) == ["links", "meta.json", "pages"]
    assert read_links(cfg) == [(a, "http://a.example/b", "B")]


def test_outlinks_only_from_successful_fetches(cfg, make_segment):
    """Outlinks recorded for a page whose latest fetch failed do not create pages or links."""
    write_db(cfg, [page(URL)])
    seg = make_segment(
        "20260101T010000000Z", [fetch(URL, "gone")], [parse(URL, [("http://x.example/", "x")])]
    )
    updatedb(cfg, [seg], LOG, now=NOW)
    assert list(read_pages(cfg)) == [URL] and read_links(cfg) == []


def test_ignore_external_links(tmp_path, make_segment):
    """With db.ignore_external_links only outlinks to the page's own host are kept (a URL that merely contains
    the host, in a longer name, a userinfo or a query, is another host's)."""
    cfg = make_cfg(tmp_path, db={"ignore_external_links": True})
    write_db(cfg, [page(URL)])
    links = [
        ("http://other.example/", "o"),
        ("http://site.example.evil/", "longer"),
        ("http://site.example@evil.example/", "userinfo"),
        ("http://evil.example/?u=http://site.example/", "query"),
        ("http://site.example/b", "b"),
        ("http://site.example:8080/c", "c"),
    ]
    updatedb(cfg, [make_segment("20260101T010000000Z", [fetch(URL)], [parse(URL, links)])], LOG, now=NOW)
    assert sorted(read_pages(cfg)) == sorted([URL, "http://site.example/b", "http://site.example:8080/c"])
    assert [to for _, to, _ in read_links(cfg)] == ["http://site.example/b", "http://site.example:8080/c"]


def test_max_outlinks_keeps_the_first_in_page_order(tmp_path, make_segment):
    """Only the first db.max_outlinks distinct outlinks of a page are followed and recorded."""
    cfg = make_cfg(tmp_path, db={"max_outlinks": 2})
    write_db(cfg, [page(URL)])
    links = [
        ("http://z.example/", "1"),
        ("http://z.example/", "dup"),
        ("http://y.example/", "2"),
        ("http://x.example/", "3"),
    ]
    updatedb(cfg, [make_segment("20260101T010000000Z", [fetch(URL)], [parse(URL, links)])], LOG, now=NOW)
    assert sorted(read_pages(cfg)) == [URL, "http://y.example/", "http://z.example/"]
    assert read_links(cfg) == [(URL, "http://y.example/", "2"), (URL, "http://z.example/", "1")]


def test_links_of_refetched_pages_are_replaced(cfg, make_segment):
    """Old links of a page fetched and parsed again are replaced; other pages' links stay."""
    other = "http://other.example/"
    write_db(
        cfg,
        [page(URL), page(other)],
        links=[
            {"from_url": URL, "to_url": "http://old.example/", "anchor": "old"},
            {"from_url": other, "to_url": URL, "anchor": "keep"},
        ],
    )
    seg = make_segment("20260101T010000000Z", [fetch(URL)], [parse(URL, [("http://new.example/", "new")])])
    updatedb(cfg, [seg], LOG, now=NOW)
    assert read_links(cfg) == sorted([(URL, "http://new.example/", "new"), (other, URL, "keep")])


def test_latest_record_across_segments_wins(cfg, make_segment):
    """When several segments fetched a URL, the record with the latest fetch time decides."""
    write_db(cfg, [page(URL)])
    late = make_segment("20260101T010000000Z", [fetch(URL, "gone", fetch_time=T1 + timedelta(minutes=5))])
    early = make_segment("20260101T020000000Z", [fetch(URL, "success", fetch_time=T1)])
    report = updatedb(cfg, [early, late], LOG, now=NOW)
    assert read_pages(cfg)[URL]["status"] == "gone"
    assert report.segments == [early.name, late.name]


def test_fetched_url_missing_from_db_is_inserted(cfg, make_segment):
    """A fetch record for a URL the webdb does not know adds that page with the fetch result applied."""
    write_db(cfg, [page(URL)])
    updatedb(cfg, [make_segment("20260101T010000000Z", [fetch("http://stray.example/")])], LOG, now=NOW)
    row = read_pages(cfg)["http://stray.example/"]
    assert (row["status"], row["host"], row["fetch_time"]) == ("fetched", "stray.example", T1)
    assert row["next_fetch"] == T1 + timedelta(seconds=cfg.db.fetch_interval)


def test_rerun_is_idempotent(cfg, make_segment):
    """Merging a segment already merged skips it with a log event and writes no new version."""
    write_db(cfg, [page(URL)])
    seg = make_segment("20260101T010000000Z", [fetch(URL)], [parse(URL, [("http://n.example/", "n")])])
    first = updatedb(cfg, [seg], LOG, now=NOW)
    before = read_pages(cfg)
    with capture_logs() as logs:
        again = updatedb(cfg, [seg], structlog.get_logger(), now=NOW + timedelta(days=1))
    assert (first.version, again.version, again.segments) == (2, 2, [])
    assert read_pages(cfg) == before
    assert any(e["event"] == "updatedb.skipped" and e["segment"] == seg.name for e in logs)
    assert VersionedStore(cfg.crawl_path / "webdb").require_current().merged_segments == [seg.name]


def test_unfinished_segment_is_rejected(cfg, make_segment):
    """A segment without fetcher/_SUCCESS raises SegmentError naming it, and the webdb is unchanged."""
    write_db(cfg, [page(URL)])
    seg = make_segment("20260101T010000000Z", [fetch(URL)], fetch_done=False)
    with pytest.raises(SegmentError, match=seg.name):
        updatedb(cfg, [seg], LOG, now=NOW)
    assert VersionedStore(cfg.crawl_path / "webdb").require_current().number == 1


def test_corrupt_part_fails_and_leaves_the_live_version(cfg, make_segment):
    """A corrupt fetcher part fails the job naming the file; CURRENT and readers keep the old version."""
    write_db(cfg, [page(URL)])
    seg = make_segment("20260101T010000000Z", [fetch(URL)])
    (seg.dir("fetcher") / "part-00000-00001.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(StorageError, match="part-00000-00001.parquet"):
        updatedb(cfg, [seg], LOG, now=NOW)
    webdb = cfg.crawl_path / "webdb"
    assert (webdb / "CURRENT").read_text().strip() == "v000001"
    assert db_stats(cfg)["version"] == 1 and read_pages(cfg)[URL]["status"] == "unfetched"
    assert not [p for p in webdb.iterdir() if p.name.startswith(".tmp-")]


def test_killed_job_is_invisible_and_cleaned_up(cfg, make_segment):
    """A writer killed midway leaves only a temp folder readers ignore; the next locked job removes it."""
    write_db(cfg, [page(URL)])
    seg = make_segment("20260101T010000000Z", [fetch(URL)])
    script = textwrap.dedent("""
        import os, sys
        from pathlib import Path
        import structlog
        import crawler.jobs.updatedb as job
        from crawler.config import CrawlerConfig
        from crawler.segments.layout import Segment

        from crawler.jobs.engine import DuckEngine
        write = DuckEngine.write
        def write_then_die(*args, **kwargs):
            write(*args, **kwargs)
            os._exit(9)  # as if killed right after the pages part was written
        DuckEngine.write = write_then_die
        job.updatedb(CrawlerConfig(crawl_dir=sys.argv[1]), [Segment(Path(sys.argv[2]))], structlog.get_logger())
    """)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(cfg.crawl_path), str(seg.path)],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 9, done.stderr.decode()
    webdb = cfg.crawl_path / "webdb"
    leftovers = [p for p in webdb.iterdir() if p.name.startswith(".tmp-")]
    assert leftovers and (leftovers[0] / "pages" / "part-00000.parquet").exists()
    assert (webdb / "CURRENT").read_text().strip() == "v000001" and not (webdb / "v000002").exists()
    assert db_stats(cfg)["version"] == 1 and read_pages(cfg)[URL]["status"] == "unfetched"

    report = updatedb(cfg, [seg], LOG, now=NOW)
    assert report.version == 2 and read_pages(cfg)[URL]["status"] == "fetched"
    assert not [p for p in webdb.iterdir() if p.name.startswith(".tmp-")]


def test_sql_host_matches_host_of():
    """The SQL host expression that new pages get agrees with normalize.host_of on normalized URLs."""
    raw = [
        "http://Example.com",
        "https://user:pw@host.example:8443/a?b=c",
        "http://[::1]:8080/x",
        "http://127.0.0.1/",
        "http://bücher.example/",
        "https://a.b.c.example/@x",
        "http://h.example:80/p:q",
    ]
    urls = [normalize(u) for u in raw]
    con = duckdb.connect()
    got = [con.execute(f"SELECT {host_sql('?')}", [u]).fetchall()[0][0] for u in urls]
    assert got == [host_of(u) for u in urls]


def test_a_page_parsed_twice_in_a_segment_counts_once(cfg, make_segment):
    """A URL with two parse_data rows in one segment (a resumed fetch) adds its links and hands on its score once."""
    target = "http://other.example/"
    write_db(cfg, [page(URL, score=2.0)])
    seg = make_segment("20260101T010000000Z", [fetch(URL)], [parse(URL, [(target, "t"), (URL, "self")])])
    write_parquet(seg.dir("parse_data") / part_name(1, 0), PARSE_DATA, [parse(URL, [(target, "t"), (URL, "self")])])
    updatedb(cfg, [seg], LOG, now=NOW)
    assert read_links(cfg) == [(URL, target, "t"), (URL, URL, "self")]
    pages = read_pages(cfg)
    assert (pages[target]["score"], pages[URL]["score"], pages[URL]["num_outlinks"]) == (1.0, 2.0, 2)
    invertlinks(make_cfg(cfg.crawl_path, linkdb={"ignore_internal": False}), [seg], LOG)
    assert inlinks_of(cfg, target)["inlinks"] == [{"from_url": URL, "anchor": "t"}]
