"""``crawler daemon``: the crawl cycle as a long-running service (see crawler/daemon/)."""

from __future__ import annotations

import argparse

import uvloop

from crawler.config import CrawlerConfig
from crawler.daemon.reload import ConfigSource
from crawler.daemon.service import Service


def cmd_daemon(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    # The file and -D overrides are kept so that SIGHUP reads the same sources again.
    source = ConfigSource(args.config_sub or args.config, [*args.defines, *args.defines_sub], cfg)
    return uvloop.run(Service(source).serve())
