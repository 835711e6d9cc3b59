"""inject: add seed URLs to the crawl database, as new ``unfetched`` pages due now.

Seeds are a file or a folder of files with one URL per line (``#`` comments and
blank lines skipped). Every URL is normalized and passed through the ``urls.*``
filters; a line that is not a valid URL, or that the filters reject, is
reported with its file, line number and reason and skipped, so one typo loses
nothing else. New pages start with ``db.score_injected``. A URL the webdb already knows keeps all its state: injecting the same
seeds again (as ``crawl`` does after a crash) changes nothing.

The live version is never rewritten: its part files are immutable, so the next
version hard-links them and adds one part with the new pages (an anti-join of
the seeds against the live pages, in SQL). updatedb later rewrites the pages
into one sorted part.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from crawler.config import CrawlerConfig
from crawler.errors import UsageError, WebDbError
from crawler.jobs.engine import JobEngine, first_line, open_engine
from crawler.jobs.sql import sql_literal, typed_columns, utc_naive
from crawler.models import LINKS, PAGES, DbStatus
from crawler.segments.layout import part_name
from crawler.urls.filters import UrlFilters
from crawler.urls.normalize import PLAIN, InvalidUrl, Normalizer, host_of
from crawler.webdb.store import Version, VersionedStore


@dataclass
class InjectReport:
    injected: int
    known: int
    rejected: int
    version: int
    filtered: int = 0


def seed_files(path: Path) -> list[Path]:
    """``path`` itself, or the regular, non-hidden files directly inside it, sorted by name."""
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    raise UsageError(f"{path}: no such seed file or folder")


def _shown(url: str) -> str:
    """A seed as logged: a megabyte-long line would make a megabyte-long log line."""
    return url if len(url) <= 300 else f"{url[:300]}... ({len(url)} characters)"


def read_seeds(path: Path, log: Any, filters: UrlFilters | None = None,
               normalizer: Normalizer = PLAIN) -> tuple[dict[str, str], int, int]:
    """Normalized seed URLs (url -> host, first occurrence wins), the number of invalid and of filtered lines."""
    seeds: dict[str, str] = {}
    rejected = filtered = 0
    normalize = normalizer.normalize
    for file in seed_files(path):
        with open(file, encoding="utf-8", errors="replace") as fh:
            for number, raw in enumerate(fh, start=1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                try:
                    url = normalize(line)
                except InvalidUrl as exc:
                    rejected += 1
                    log.warning("inject.rejected", file=str(file), line=number, url=_shown(line), reason=str(exc))
                    continue
                reason = filters.check(url) if filters is not None else None
                if reason is not None:
                    filtered += 1
                    log.info("inject.filtered", file=str(file), line=number, url=_shown(url), reason=reason)
                    continue
                if url not in seeds:
                    seeds[url] = host_of(url)
    return seeds, rejected, filtered


def link_parts(source: Path, dest: Path) -> list[Path]:
    """Hard-link (else copy) the Parquet parts of ``source`` into ``dest``: versions are immutable."""
    dest.mkdir(parents=True, exist_ok=True)
    linked = []
    for part in sorted(source.glob("*.parquet")):
        target = dest / part.name
        try:
            os.link(part, target)
        except OSError:
            shutil.copyfile(part, target)
        linked.append(target)
    return linked


def inject(cfg: CrawlerConfig, path: Path, log: Any) -> InjectReport:
    seeds, rejected, filtered = read_seeds(Path(path), log, UrlFilters(cfg.urls), Normalizer.from_config(cfg))
    store = VersionedStore(cfg.crawl_path / "webdb")
    with store.lock():
        current = store.current()
        con = open_engine(cfg)
        try:
            injected = _select_new(con, cfg, current, seeds)
            if injected or current is None:
                _write_version(con, store, current)
        except con.errors as exc:
            raise WebDbError(f"inject: {first_line(exc)}") from exc
        finally:
            con.close()
        number = store.require_current().number
    known = len(seeds) - injected
    log.info(
        "inject.done", injected=injected, known=known, rejected=rejected, filtered=filtered, version=number
    )
    return InjectReport(injected, known, rejected, number, filtered)


def _select_new(
    con: JobEngine, cfg: CrawlerConfig, current: Version | None, seeds: dict[str, str]
) -> int:
    """Table ``new_pages``: the seeds the live version does not know, as fresh pages; returns their count."""
    con.register(
        "seed_arrow",
        pa.table(
            {"url": list(seeds), "host": list(seeds.values())},
            schema=pa.schema([PAGES.field("url"), PAGES.field("host")]),
        ),
    )
    con.create_table(
        "new_pages",
        f"""SELECT s.url, s.host, {sql_literal(DbStatus.UNFETCHED.value)} AS status, NULL AS fetch_time,
               {sql_literal(utc_naive(None))} AS next_fetch, 0 AS retries,
               {sql_literal(float(cfg.db.fetch_interval))} AS fetch_interval,
               {sql_literal(float(cfg.db.score_injected))} AS score, NULL AS digest, NULL AS num_outlinks,
               NULL AS modified_time, NULL AS etag, NULL AS http_status, NULL AS simhash
        FROM seed_arrow s
        WHERE NOT EXISTS (SELECT 1 FROM {con.source(_parts(current, "pages"), PAGES)} p WHERE p.url = s.url)""",
    )
    return int(con.rows("SELECT count(*) FROM new_pages")[0][0])


def _write_version(con: JobEngine, store: VersionedStore, current: Version | None) -> None:
    """The next version: the live parts linked unchanged, plus one part with ``new_pages``."""
    meta = {k: v for k, v in (current.meta if current else {}).items() if k not in ("version", "created")}
    meta["merged_segments"] = current.merged_segments if current else []
    with store.new_version(meta) as temp:
        pages, links = temp / "pages", temp / "links"
        pages.mkdir()
        links.mkdir()
        if current is not None:
            link_parts(current.path / "pages", pages)
            link_parts(current.path / "links", links)
        query = f"SELECT {typed_columns(PAGES)} FROM new_pages ORDER BY url"
        con.write(query, pages / _free_part_name(pages), PAGES, single=False)
        if not any(links.glob("*.parquet")):
            con.write(f"SELECT * FROM {con.source([], LINKS)}", links / part_name(0), LINKS)


def _parts(version: Version | None, table: str) -> list[Path]:
    return sorted((version.path / table).glob("*.parquet")) if version else []


def _free_part_name(folder: Path) -> str:
    n = 0
    while (folder / part_name(n)).exists():
        n += 1
    return part_name(n)
