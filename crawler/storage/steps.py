"""One step of a crawl round or daemon cycle, staged as its own command would be.

With Spark jobs over a bucket (``staged_by_step``) no one staging tree can serve
a whole cycle: the jobs go by reference (the executors read and write the
bucket) while a fetch reads real files in the ordinary staging copy. So crawl
and the daemon run each step under ``staged`` with its command's ACCESS entry:
it leases, pulls and publishes for itself, and the bucket holds every finished
step before the next one reads it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig
from crawler.storage.access import Access
from crawler.storage.session import reference_config, staged

# What is left to finish (unmerged segments, uninverted ones): markers and CURRENT only, so by reference.
STATE = Access(reads=("webdb", "linkdb"), segments="unmerged", engine_io=True)
# A segment's fetchlist alone, into the ordinary staging copy, leasing nothing (as a fetch --spark driver pulls it).
FETCHLIST = Access(segments="args", segment_args=("segment",), partitions="partition", partitions_on_executors="spark")


@contextmanager
def as_command(cfg: CrawlerConfig, command: str | Access, **values: Any) -> Iterator[tuple[CrawlerConfig,
                                                                                          argparse.Namespace]]:
    """``command`` (a CLI command's name, or an Access of its own) staged with ``values`` as its arguments.

    Yields the config to run it with and the arguments as staged (segment paths in its tree, leased partitions).
    """
    from crawler.cli import ACCESS  # the CLI imports the commands lazily: no cycle

    args = argparse.Namespace(**values)
    with staged(cfg, args, ACCESS[command] if isinstance(command, str) else command) as run_cfg:
        yield run_cfg, args


def reference_tree(cfg: CrawlerConfig) -> Path:
    """Where the steps that go by reference find their files (the crawl folder of the reference tree)."""
    return reference_config(cfg).crawl_path
