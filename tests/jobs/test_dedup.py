from __future__ import annotations

import structlog

from crawler.jobs.dedup import dedup
from crawler.webdb.store import VersionedStore

from .conftest import page, read_links, read_pages, write_db

LOG = structlog.get_logger()
D1, D2 = "1" * 32, "2" * 32


def fetched(url: str, digest: str, score: float = 1.0, status: str = "fetched") -> dict:
    return page(url, status=status, digest=digest, score=score)


def statuses(cfg) -> dict[str, str]:
    return {url: row["status"] for url, row in read_pages(cfg).items()}


def test_keeps_highest_score_then_shortest_url(cfg):
    """In each digest group the highest score wins, ties go to the shortest URL; the rest become duplicate."""
    write_db(
        cfg,
        [
            fetched("http://a.example/long-name", D1, score=5.0),
            fetched("http://a.example/x", D1, score=1.0),
            fetched("http://b.example/p", D2, score=1.0),
            fetched("http://b.example/page", D2, score=1.0, status="notmodified"),
            fetched("http://c.example/", "3" * 32),
        ],
        links=[{"from_url": "http://a.example/x", "to_url": "http://b.example/p", "anchor": "p"}],
    )
    report = dedup(cfg, LOG)
    assert statuses(cfg) == {
        "http://a.example/long-name": "fetched",
        "http://a.example/x": "duplicate",
        "http://b.example/p": "fetched",
        "http://b.example/page": "duplicate",
        "http://c.example/": "fetched",
    }
    assert (report.marked, report.restored, report.version) == (2, 0, 2)
    assert read_links(cfg) == [("http://a.example/x", "http://b.example/p", "p")]


def test_only_fetched_pages_with_a_digest_take_part(cfg):
    """Unfetched, gone and redirect pages are never marked, whatever digest they carry."""
    write_db(
        cfg,
        [
            fetched("http://a.example/", D1),
            page("http://b.example/", status="gone", digest=D1, score=9.0),
            page("http://c.example/", status="redirect_perm", digest=D1, score=9.0),
            page("http://d.example/"),
        ],
    )
    report = dedup(cfg, LOG)
    assert set(statuses(cfg).values()) == {"fetched", "gone", "redirect_perm", "unfetched"}
    assert report.marked == 0


def test_rerun_writes_no_version(cfg):
    """A second dedup with nothing to change writes no new webdb version."""
    write_db(cfg, [fetched("http://a.example/", D1), fetched("http://a.example/b", D1)])
    assert dedup(cfg, LOG).version == 2
    again = dedup(cfg, LOG)
    assert (again.version, again.marked, again.restored) == (2, 0, 0)
    assert VersionedStore(cfg.crawl_path / "webdb").require_current().number == 2


def test_duplicate_whose_keeper_changed_is_restored(cfg):
    """When the kept page's content changed, the best page still holding the old digest goes back to fetched."""
    write_db(
        cfg,
        [
            fetched("http://a.example/", D2, score=5.0),  # was the keeper of D1, now has new content
            fetched("http://a.example/copy", D1, status="duplicate"),
        ],
    )
    report = dedup(cfg, LOG)
    assert statuses(cfg)["http://a.example/copy"] == "fetched"
    assert (report.marked, report.restored) == (0, 1)
