"""readdb and readseg: read the crawl database and segments with results on stdout."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from crawler.config import CrawlerConfig
from crawler.errors import CrawlerError, UsageError
from crawler.jobs import readdb, readseg
from crawler.segments.layout import open_segment
from crawler.urls.normalize import Normalizer


def _print_json(obj: object) -> None:
    print(json.dumps(obj, ensure_ascii=False, default=str))


def _stats_text(stats: dict) -> str:
    lines = [f"webdb version {stats.get('version')}: {stats.get('urls', 0)} URLs"]
    for status, count in stats.get("by_status", {}).items():
        lines.append(f"  {status:<14} {count}")
    score = stats.get("score") or {}
    if score:
        lines.append("  score          min {min} / avg {avg} / max {max}".format(
            **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in score.items()}))
    for key in ("hosts", "due_now", "links"):
        if key in stats:
            lines.append(f"  {key:<14} {stats[key]}")
    if cut := stats.get("over_cap"):
        lines.append(f"  over cap       {cut['outlinks']} outlinks (db.max_outlinks), {cut['sitemap_urls']} sitemap URLs "
                     f"(sitemap.max_urls), on {cut['pages']} pages: never queued")
    return "\n".join(lines)


def cmd_readdb(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    if args.status and not args.dump:
        raise UsageError("readdb: --status goes with --dump")
    if args.stats:
        stats = readdb.db_stats(cfg)
        if args.json:
            _print_json(stats)
        else:
            print(_stats_text(stats))
        return 0
    if args.url:
        record = readdb.lookup(cfg, args.url)
        if record is None:
            raise CrawlerError(f"readdb: {args.url} is not in the crawl database")
        _print_json(record)
        return 0
    if args.format == "parquet":
        if not args.out:
            raise CrawlerError("readdb --dump --format parquet needs --out PATH")
        readdb.dump_parquet(cfg, Path(args.out), args.status)
        return 0
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            readdb.dump_jsonl(cfg, out, args.status)
    else:
        readdb.dump_jsonl(cfg, sys.stdout, args.status)
    return 0


def cmd_readseg(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    if args.list:
        for summary in readseg.segment_summaries(cfg):
            _print_json(summary)
        return 0
    if args.dump:
        readseg.dump_segment(open_segment(args.dump), sys.stdout)
        return 0
    segment_path, url = args.get
    record = readseg.get_record(open_segment(segment_path), url, normalizer=Normalizer.from_config(cfg))
    if record is None:
        raise CrawlerError(f"readseg: {url} is not in {segment_path}")
    _print_json(record)
    return 0
