from __future__ import annotations

import asyncio
import hashlib
from collections import defaultdict
from datetime import timedelta

import duckdb
import pyarrow.parquet as pq
import pytest
import structlog
from structlog.testing import capture_logs

from crawler.errors import WebDbError
from crawler.fetcher.queuekey import IpKey
from crawler.jobs.count_keys import count_keys
from crawler.jobs.generate import generate, partition_sql
from crawler.jobs.updatedb import updatedb
from crawler.models import FETCHER, FETCHLIST
from crawler.segments.layout import part_name, partition_of

from .conftest import NOW, T0, fetch, make_cfg, page, write_db, write_parquet

LOG = structlog.get_logger()


def fetchlist(report) -> dict[int, list[dict]]:
    """Entries of each written part, in file order, keyed by the part's partition number."""
    parts = {}
    for path in report.segment.parts("fetchlist"):
        table = pq.read_table(path)
        assert table.schema.equals(FETCHLIST)
        parts[int(path.stem.split("-")[1])] = table.to_pylist()
    return parts


def urls(report) -> list[str]:
    return sorted(e["url"] for entries in fetchlist(report).values() for e in entries)


def test_selects_due_pages_by_score_up_to_top_n(tmp_path):
    """The top_n due pages with the highest scores are selected; pages not due or duplicates are not."""
    cfg = make_cfg(tmp_path, generate={"top_n": 3})
    pages = [page(f"http://h{i}.example/", score=float(i)) for i in range(6)]
    pages += [
        page("http://later.example/", score=99.0, next_fetch=NOW + timedelta(seconds=1)),
        page("http://dup.example/", score=99.0, status="duplicate"),
        page("http://gone.example/", score=50.0, status="gone", next_fetch=T0),
    ]
    write_db(cfg, pages)
    report = generate(cfg, LOG, now=NOW)
    assert report.selected == 3
    assert urls(report) == ["http://gone.example/", "http://h4.example/", "http://h5.example/"]
    assert report.segment.is_done("fetchlist")
    entry = next(e for e in fetchlist(report)[0] if e["url"] == "http://gone.example/")
    assert (entry["db_status"], entry["score"], entry["host"]) == ("gone", 50.0, "gone.example")


def test_max_per_host(tmp_path):
    """No host gets more than max_per_host entries, and they are its best-scored URLs."""
    cfg = make_cfg(tmp_path, generate={"max_per_host": 2})
    pages = [page(f"http://a.example/{i}", score=float(i)) for i in range(5)]
    pages += [page("http://b.example/1")]
    write_db(cfg, pages)
    report = generate(cfg, LOG, now=NOW)
    assert urls(report) == ["http://a.example/3", "http://a.example/4", "http://b.example/1"]


def test_hosts_are_partitioned_like_partition_of(tmp_path):
    """Every host lands in exactly one part, the one partition_of names, with one part per used partition."""
    cfg = make_cfg(tmp_path, generate={"partitions": 4})
    hosts = [f"host{i}.example" for i in range(40)]
    write_db(cfg, [page(f"http://{h}/{j}") for h in hosts for j in range(3)])
    report = generate(cfg, LOG, now=NOW)
    parts = fetchlist(report)
    assert report.partitions == len(parts) == len({partition_of(h, 4) for h in hosts})
    seen = defaultdict(set)
    for number, entries in parts.items():
        for e in entries:
            assert e["partition"] == number == partition_of(e["host"], 4)
            seen[e["host"]].add(number)
    assert set(seen) == set(hosts) and all(len(s) == 1 for s in seen.values())
    assert report.selected == 120


def test_sql_partition_matches_partition_of():
    """The SQL partition expression and layout.partition_of agree on many hosts and partition counts."""
    hosts = [f"h{i}.example.com" for i in range(500)] + ["127.0.0.1", "[::1]", "xn--bcher-kva.example", ""]
    con = duckdb.connect()
    con.execute("CREATE TABLE hosts (host VARCHAR)")
    con.executemany("INSERT INTO hosts VALUES (?)", [[h] for h in hosts])
    for partitions in (1, 2, 7, 64, 1000, 100_000):
        rows = con.execute(f"SELECT host, {partition_sql('host', partitions)} FROM hosts").fetchall()
        assert {h: p for h, p in rows} == {h: partition_of(h, partitions) for h in hosts}


def test_hosts_are_interleaved_within_a_part(tmp_path):
    """A part lists every host's best URL, then every host's second, ..., hosts in md5 order."""
    cfg = make_cfg(tmp_path)
    hosts = ["a.example", "b.example", "c.example"]
    write_db(cfg, [page(f"http://{h}/{j}", score=10.0 - j) for h in hosts for j in range(3)])
    entries = fetchlist(generate(cfg, LOG, now=NOW))[0]
    by_md5 = sorted(hosts, key=lambda h: hashlib.md5(h.encode()).hexdigest())
    assert [e["url"] for e in entries] == [f"http://{h}/{j}" for j in range(3) for h in by_md5]


def test_urls_in_unmerged_segments_are_not_handed_out_twice(cfg):
    """A later generate skips URLs in fetchlists no webdb version has merged yet, and frees them once merged."""
    cfg = make_cfg(cfg.crawl_path, generate={"top_n": 2})
    write_db(cfg, [page(f"http://h{i}.example/", score=float(i)) for i in range(4)])
    first = generate(cfg, LOG, now=NOW)
    second = generate(cfg, LOG, now=NOW)
    assert urls(first) == ["http://h2.example/", "http://h3.example/"]
    assert urls(second) == ["http://h0.example/", "http://h1.example/"]
    assert generate(cfg, LOG, now=NOW).segment is None
    # The first segment was fetched with no result and merged: its URLs are still due, so they come back.
    first.segment.dir("fetcher").mkdir()
    first.segment.mark_done("fetcher")
    updatedb(cfg, [first.segment], LOG, now=NOW)
    assert urls(generate(cfg, LOG, now=NOW)) == ["http://h2.example/", "http://h3.example/"]


def test_nothing_due_creates_no_segment(cfg):
    """With nothing due, generate logs generate.empty, returns no segment and leaves no folder behind."""
    write_db(cfg, [page("http://a.example/", next_fetch=NOW + timedelta(days=1))])
    with capture_logs() as logs:
        report = generate(cfg, structlog.get_logger(), now=NOW)
    assert (report.segment, report.selected, report.partitions) == (None, 0, 0)
    assert [e["event"] for e in logs if e["event"] != "job.progress"] == ["generate.empty"]
    segments = cfg.crawl_path / "segments"
    assert not segments.exists() or not any(segments.iterdir())


def test_done_event_names_the_segment(cfg):
    """generate.done carries the segment path, the number selected and the number of parts."""
    write_db(cfg, [page("http://a.example/")])
    with capture_logs() as logs:
        report = generate(cfg, structlog.get_logger(), now=NOW)
    done = [e for e in logs if e["event"] == "generate.done"]
    assert done == [
        {
            "event": "generate.done",
            "log_level": "info",
            "segment": str(report.segment.path),
            "selected": 1,
            "partitions": 1,
        }
    ]


def test_no_webdb_is_an_error(cfg):
    """generate without a crawl database raises WebDbError."""
    with pytest.raises(WebDbError):
        generate(cfg, LOG, now=NOW)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("host", ["http://a.shop.example.co.uk/1", "http://b.shop.example.co.uk/1", "http://other.example/1"]),
        ("domain", ["http://a.shop.example.co.uk/1", "http://other.example/1"]),
    ],
)
def test_count_mode_host_or_registered_domain(tmp_path, mode, expected):
    """max_per_host counts per host, or per registered domain (public suffix list) under count_mode domain."""
    cfg = make_cfg(tmp_path, generate={"max_per_host": 1, "count_mode": mode})
    hosts = {"a.shop.example.co.uk": 3.0, "b.shop.example.co.uk": 2.0, "other.example": 1.0}
    write_db(cfg, [page(f"http://{h}/{j}", score=s - j) for h, s in hosts.items() for j in (1, 2)])
    assert urls(generate(cfg, LOG, now=NOW)) == expected


def test_count_mode_ip(tmp_path):
    """Under count_mode ip, hosts pinned to one address by http.resolve share one limit; IP literals count alone."""
    cfg = make_cfg(
        tmp_path,
        generate={"max_per_host": 1, "count_mode": "ip"},
        http={"resolve": {"a.test": "127.0.0.5", "b.test": "127.0.0.5", "c.test": "127.0.0.6"}},
    )
    write_db(
        cfg,
        [
            page("http://a.test/", score=3.0),
            page("http://b.test/", score=2.0),
            page("http://c.test/", score=1.0),
            page("http://127.0.0.5/", score=0.5),
        ],
    )
    assert urls(generate(cfg, LOG, now=NOW)) == ["http://a.test/", "http://c.test/"]


def test_gone_pages_come_back_after_max_interval(tmp_path):
    """A page that went gone is not generated before its next_fetch (fetch + db.max_interval), then it is."""
    cfg = make_cfg(tmp_path, db={"max_interval": 7200})
    url = "http://g.example/"
    write_db(cfg, [page(url, next_fetch=T0)])
    seg = generate(cfg, LOG, now=NOW).segment
    write_parquet(seg.dir("fetcher") / part_name(0, 0), FETCHER, [fetch(url, "gone", fetch_time=NOW)])
    seg.mark_done("fetcher")
    updatedb(cfg, [seg], LOG, now=NOW)
    assert generate(cfg, LOG, now=NOW + timedelta(seconds=7199)).segment is None
    assert urls(generate(cfg, LOG, now=NOW + timedelta(seconds=7200))) == [url]


def test_count_mode_ip_groups_as_the_fetchers_queues(tmp_path):
    """count_mode ip keys every host exactly as fetcher.queue_mode ip queues it: pins, failures, literals."""
    cfg = make_cfg(tmp_path, generate={"count_mode": "ip"},
                   http={"resolve": {"a.test": "127.0.0.5", "b.test": "127.0.0.5", "gone.test": ""}})
    hosts = ["a.test", "b.test", "gone.test", "127.0.0.7"]

    async def queue_keys() -> list[str]:
        ip_key = IpKey(cfg)
        try:
            return [await ip_key.key(h) for h in hosts]
        finally:
            await ip_key.aclose()

    assert count_keys(hosts, cfg) == asyncio.run(queue_keys()) == ["127.0.0.5", "127.0.0.5", "gone.test", "127.0.0.7"]
