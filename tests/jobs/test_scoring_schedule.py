"""updatedb in depth: OPIC scores, the adaptive schedule, URL filters and several segments at once."""

from __future__ import annotations

from datetime import timedelta

import pytest
import structlog

from crawler.jobs.inject import inject
from crawler.jobs.updatedb import updatedb
from crawler.webdb.store import VersionedStore

from .conftest import NOW, T1, fetch, make_cfg, page, parse, read_links, read_pages, write_db

LOG = structlog.get_logger()
A, B, C = "http://a.example/", "http://b.example/", "http://c.example/"


class TestOpic:
    def test_cash_flows_to_known_and_new_pages(self, cfg, make_segment):
        """A fetched page hands score/fanout to every outlink: known pages add it, new pages start with it."""
        write_db(cfg, [page(A, score=2.0), page(B, score=1.0)])
        seg = make_segment("20260101T010000000Z", [fetch(A)], [parse(A, [(B, "b"), (C, "c"), (A, "self")])])
        updatedb(cfg, [seg], LOG, now=NOW)
        pages = read_pages(cfg)
        assert pages[B]["score"] == pytest.approx(1.0 + 2.0 / 3)
        assert pages[C]["score"] == pytest.approx(2.0 / 3)
        assert pages[A]["score"] == pytest.approx(2.0)  # a self-link carries nothing

    def test_cash_is_counted_once_per_segment(self, cfg, make_segment):
        """Merging the same segment again adds no more cash; a new segment fetching the page again does."""
        write_db(cfg, [page(A, score=1.0), page(B, score=1.0)])
        first = make_segment("20260101T010000000Z", [fetch(A)], [parse(A, [(B, "b")])])
        updatedb(cfg, [first], LOG, now=NOW)
        updatedb(cfg, [first], LOG, now=NOW)
        assert read_pages(cfg)[B]["score"] == pytest.approx(2.0)
        again = make_segment(
            "20260102T010000000Z", [fetch(A, fetch_time=T1 + timedelta(days=1))], [parse(A, [(B, "b")])]
        )
        updatedb(cfg, [again], LOG, now=NOW)
        assert read_pages(cfg)[B]["score"] == pytest.approx(3.0)

    def test_unknown_fetched_url_starts_with_score_injected(self, tmp_path, make_segment):
        """A fetched URL the webdb never knew, with no inlinks, starts at db.score_injected."""
        cfg = make_cfg(tmp_path, db={"score_injected": 0.25})
        write_db(cfg, [page(A)])
        updatedb(cfg, [make_segment("20260101T010000000Z", [fetch(C)])], LOG, now=NOW)
        assert read_pages(cfg)[C]["score"] == pytest.approx(0.25)

    def test_injected_seeds_get_score_injected(self, tmp_path):
        """inject gives new seeds db.score_injected."""
        cfg = make_cfg(tmp_path, db={"score_injected": 3.5})
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"{A}\n")
        inject(cfg, seeds, LOG)
        assert read_pages(cfg)[A]["score"] == 3.5

    def test_outlink_cap_limits_the_fanout(self, tmp_path, make_segment):
        """Cash is split over the db.max_outlinks kept outlinks only."""
        cfg = make_cfg(tmp_path, db={"max_outlinks": 2})
        write_db(cfg, [page(A, score=1.0)])
        links = [(f"http://x{i}.example/", "") for i in range(4)]
        updatedb(cfg, [make_segment("20260101T010000000Z", [fetch(A)], [parse(A, links)])], LOG, now=NOW)
        pages = read_pages(cfg)
        assert pages["http://x0.example/"]["score"] == pytest.approx(0.5)
        assert "http://x2.example/" not in pages and pages[A]["num_outlinks"] == 4


# previous digest, fetch status, fetched digest -> new interval (inc 0.5, dec 0.25, bounds 400..1600)
ADAPTIVE = [
    ("a" * 32, "success", "a" * 32, 1500.0),  # unchanged: grows
    ("a" * 32, "success", "b" * 32, 750.0),  # changed: shrinks
    ("a" * 32, "notmodified", None, 1500.0),  # 304: unchanged
    (None, "success", "b" * 32, 1000.0),  # first fetch: no evidence either way
    ("a" * 32, "gone", None, 1000.0),  # no content: interval kept
]


class TestSchedule:
    @pytest.mark.parametrize(("old", "status", "new", "interval"), ADAPTIVE)
    def test_adaptive_interval(self, tmp_path, make_segment, old, status, new, interval):
        """Under db.schedule adaptive, changed pages are refetched sooner and unchanged ones later."""
        db = {"schedule": "adaptive", "inc_rate": 0.5, "dec_rate": 0.25, "min_interval": 400, "max_interval": 1600}
        cfg = make_cfg(tmp_path, db=db)
        write_db(cfg, [page(A, status="fetched", digest=old, fetch_interval=1000.0)])
        updatedb(cfg, [make_segment("20260101T010000000Z", [fetch(A, status, digest=new)])], LOG, now=NOW)
        row = read_pages(cfg)[A]
        assert row["fetch_interval"] == pytest.approx(interval)
        if status != "gone":
            assert row["next_fetch"] == T1 + timedelta(seconds=interval)

    @pytest.mark.parametrize(("start", "new", "bound"), [(1500.0, "a" * 32, 1600.0), (450.0, "b" * 32, 400.0)])
    def test_adaptive_interval_stays_within_bounds(self, tmp_path, make_segment, start, new, bound):
        """The adaptive interval never grows past db.max_interval nor shrinks below db.min_interval."""
        db = {"schedule": "adaptive", "inc_rate": 0.5, "dec_rate": 0.25, "min_interval": 400, "max_interval": 1600}
        cfg = make_cfg(tmp_path, db=db)
        write_db(cfg, [page(A, status="fetched", digest="a" * 32, fetch_interval=start)])
        updatedb(cfg, [make_segment("20260101T010000000Z", [fetch(A, digest=new)])], LOG, now=NOW)
        assert read_pages(cfg)[A]["fetch_interval"] == pytest.approx(bound)

    def test_fixed_schedule_keeps_the_interval(self, cfg, make_segment):
        """Under the default fixed schedule a changed page keeps its interval."""
        write_db(cfg, [page(A, status="fetched", digest="a" * 32, fetch_interval=1000.0)])
        updatedb(cfg, [make_segment("20260101T010000000Z", [fetch(A, digest="b" * 32)])], LOG, now=NOW)
        assert read_pages(cfg)[A]["fetch_interval"] == 1000.0


class TestFiltersAtUpdatedb:
    def test_rejected_outlinks_and_redirect_targets_are_dropped(self, tmp_path, make_segment):
        """Outlinks and redirect targets the urls.* filters reject never become pages or links."""
        cfg = make_cfg(tmp_path, urls={"filters": [r"-\.pdf$", "+."], "max_length": 40})
        write_db(cfg, [page(A), page(B)])
        long_url = "http://c.example/" + "x" * 40
        seg = make_segment(
            "20260101T010000000Z",
            [fetch(A), fetch(B, "redirect_perm", redirect_url="http://b.example/doc.pdf")],
            [parse(A, [("http://a.example/doc.pdf", "pdf"), (long_url, "long"), (C, "ok")])],
        )
        updatedb(cfg, [seg], LOG, now=NOW)
        assert sorted(read_pages(cfg)) == [A, B, C]
        assert read_links(cfg) == [(A, C, "ok")]


def test_several_segments_in_one_run(cfg, make_segment):
    """One updatedb merges several segments: every fetch applies and the version lists them all."""
    write_db(cfg, [page(A), page(B)])
    one = make_segment("20260101T010000000Z", [fetch(A)], [parse(A, [(C, "c")])])
    two = make_segment("20260101T020000000Z", [fetch(B, "gone")])
    report = updatedb(cfg, [one, two], LOG, now=NOW)
    pages = read_pages(cfg)
    assert (pages[A]["status"], pages[B]["status"], pages[C]["status"]) == ("fetched", "gone", "unfetched")
    assert report.segments == [one.name, two.name]
    assert VersionedStore(cfg.crawl_path / "webdb").require_current().merged_segments == [one.name, two.name]
