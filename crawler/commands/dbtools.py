"""invertlinks, dedup, updatesegs and readlinkdb: the crawl database tools beyond the fetch cycle."""

from __future__ import annotations

import argparse
import json
import sys

from crawler.config import CrawlerConfig
from crawler.errors import UsageError
from crawler.jobs.dedup import dedup
from crawler.jobs.invertlinks import invertlinks
from crawler.jobs.readlinkdb import dump_linkdb, inlinks_of
from crawler.jobs.updatesegs import updatesegs
from crawler.log import get_logger
from crawler.segments.layout import open_segment


def cmd_invertlinks(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    invertlinks(cfg, [open_segment(s) for s in args.segments], get_logger(command="invertlinks"))
    return 0


def cmd_dedup(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    dedup(cfg, get_logger(command="dedup"))
    return 0


def cmd_updatesegs(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    updatesegs(cfg, [open_segment(s) for s in args.segments], get_logger(command="updatesegs"))
    return 0


def cmd_readlinkdb(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    if args.url and args.dump or not (args.url or args.dump):
        raise UsageError("readlinkdb: give exactly one of --url URL or --dump")
    if args.url:
        print(json.dumps(inlinks_of(cfg, args.url), ensure_ascii=False))
    else:
        dump_linkdb(cfg, sys.stdout)
    return 0
