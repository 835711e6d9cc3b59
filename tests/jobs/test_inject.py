from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import structlog
from structlog.testing import capture_logs

from crawler.errors import UsageError
from crawler.jobs.inject import inject
from crawler.webdb.store import VersionedStore

from .conftest import T0, make_cfg, page, read_links, read_pages, write_db

LOG = structlog.get_logger()


def test_new_seeds_are_unfetched_and_due_now(cfg, tmp_path):
    """Injected seeds are normalized and stored as unfetched pages due now with the configured interval."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("HTTP://Example.COM\n  https://b.example/x#frag  \n")
    before = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)
    report = inject(make_cfg(tmp_path, db={"fetch_interval": "2d"}), seeds, LOG)
    assert (report.injected, report.known, report.rejected, report.version) == (2, 0, 0, 1)
    pages = read_pages(cfg)
    assert sorted(pages) == ["http://example.com/", "https://b.example/x"]
    row = pages["http://example.com/"]
    assert row["host"] == "example.com"
    assert row["status"] == "unfetched"
    assert (row["retries"], row["score"], row["fetch_interval"]) == (0, 1.0, 172800.0)
    assert before <= row["next_fetch"] <= datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=1)
    assert row["fetch_time"] is None


def test_comments_blank_lines_and_duplicates(cfg, tmp_path):
    """Comments and blank lines are skipped and a URL listed twice (in any spelling) counts once."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# my seeds\n\nhttp://a.example/\n   \nhttp://A.example:80/\n#http://c.example/\n")
    report = inject(cfg, seeds, LOG)
    assert (report.injected, report.known, report.rejected) == (1, 0, 0)
    assert list(read_pages(cfg)) == ["http://a.example/"]


def test_known_urls_keep_their_state(cfg, tmp_path):
    """Injecting a URL the webdb already has keeps all its state; only new URLs are added."""
    fetched = page(
        "http://a.example/", status="fetched", score=5.0, retries=0, digest="d" * 32, fetch_time=T0
    )
    write_db(
        cfg,
        [fetched],
        links=[{"from_url": "http://a.example/", "to_url": "http://z.example/", "anchor": "z"}],
        merged=["20260101T000000000Z"],
    )
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.example/\nhttp://b.example/\n")
    report = inject(cfg, seeds, LOG)
    assert (report.injected, report.known, report.version) == (1, 1, 2)
    pages = read_pages(cfg)
    assert pages["http://a.example/"] == fetched | {
        "num_outlinks": None,
        "modified_time": None,
        "etag": None,
        "http_status": None,
        "simhash": None,
    }
    assert pages["http://b.example/"]["status"] == "unfetched"
    assert read_links(cfg) == [("http://a.example/", "http://z.example/", "z")]
    meta = json.loads(
        (VersionedStore(cfg.crawl_path / "webdb").require_current().path / "meta.json").read_text()
    )
    assert meta["merged_segments"] == ["20260101T000000000Z"]


def test_nothing_new_writes_no_version(cfg, tmp_path):
    """Re-injecting the same seeds reports them as known and leaves the live version as it is."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.example/\n")
    inject(cfg, seeds, LOG)
    report = inject(cfg, seeds, LOG)
    assert (report.injected, report.known, report.version) == (0, 1, 1)


def test_bad_lines_are_reported_with_file_and_line(cfg, tmp_path):
    """An invalid seed line is logged with its file, line number and reason, and the others are injected."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://ok.example/\nftp://files.example/\n\nnot a url\nhttp://ok2.example/\n")
    with capture_logs() as logs:
        report = inject(cfg, seeds, structlog.get_logger())
    assert (report.injected, report.rejected) == (2, 2)
    rejected = [e for e in logs if e["event"] == "inject.rejected"]
    assert [(e["file"], e["line"], e["url"]) for e in rejected] == [
        (str(seeds), 2, "ftp://files.example/"),
        (str(seeds), 4, "not a url"),
    ]
    assert all(e["log_level"] == "warning" and e["reason"] for e in rejected)
    assert "scheme" in rejected[0]["reason"]


def test_folder_of_seed_files(cfg, tmp_path):
    """A folder injects every regular non-hidden file directly inside it, in name order."""
    folder = tmp_path / "seeds"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.txt").write_text("http://b.example/\nbad\n")
    (folder / "a.txt").write_text("http://a.example/\n")
    (folder / ".hidden").write_text("http://hidden.example/\n")
    (folder / "sub" / "c.txt").write_text("http://c.example/\n")
    with capture_logs() as logs:
        report = inject(cfg, folder, structlog.get_logger())
    assert (report.injected, report.rejected) == (2, 1)
    assert sorted(read_pages(cfg)) == ["http://a.example/", "http://b.example/"]
    assert [(e["file"], e["line"]) for e in logs if e["event"] == "inject.rejected"] == [
        (str(folder / "b.txt"), 2)
    ]


def test_missing_path_is_a_usage_error(cfg, tmp_path):
    """A seed path that does not exist raises UsageError naming it and creates no database."""
    missing = tmp_path / "nope.txt"
    with pytest.raises(UsageError, match="nope.txt"):
        inject(cfg, missing, LOG)
    assert VersionedStore(cfg.crawl_path / "webdb").current() is None


def test_every_version_has_pages_and_links_parts(cfg, tmp_path):
    """Even an inject of nothing valid creates a version with a pages and a links part, so globs never fail."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# only a comment\n")
    report = inject(cfg, seeds, LOG)
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    assert report.version == version.number == 1
    assert version.has("pages") and version.has("links")
    assert read_pages(cfg) == {} and read_links(cfg) == []
