"""``crawler parse SEGMENT``: re-parse a fetched segment from its content."""

from __future__ import annotations

import argparse

from crawler.config import CrawlerConfig
from crawler.log import get_logger
from crawler.parsers.reparse import reparse_segment
from crawler.segments.layout import open_segment


def cmd_parse(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    reparse_segment(cfg, open_segment(args.segment), get_logger(command="parse"))
    return 0
