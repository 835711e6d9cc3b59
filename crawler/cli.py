"""The ``crawler`` command line: argument parsing, config loading, and the exit-code contract.

stdout carries only results; logs go to stderr. A failing command prints one
plain line on stderr and exits non-zero (2 for bad config or arguments).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from crawler.crawldir import parse_remote
from crawler.errors import CrawlerError, UsageError
from crawler.storage.access import ACCESS

if TYPE_CHECKING:
    from crawler.config import CrawlerConfig

# The config (pydantic), logging (structlog) and the workspace are imported by main(), not here: each
# process of a parse pool (forked from the fork server, crawler/fetcher/forkserver.py) and the fork server
# itself import the `crawler` script's module, this one, for nothing.


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message if self.prog == "crawler" else f"{self.prog.removeprefix('crawler ')}: {message}")


def _common(parser: argparse.ArgumentParser, dest_suffix: str) -> None:
    # Accepted before or after the subcommand: each level keeps its own list, merged later.
    parser.add_argument("-c", "--config", dest=f"config{dest_suffix}", default=None, metavar="FILE",
                        help="config file (default ./config.yaml if present)")
    parser.add_argument("-D", dest=f"defines{dest_suffix}", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. -D fetcher.concurrency=64")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="crawler", description="A Nutch-style web crawler.")
    _common(parser, "")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name: str, handler: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        _common(p, "_sub")
        p.set_defaults(handler=handler, access=ACCESS.get(name))
        return p

    p = add("inject", "cycle:cmd_inject", "add seed URLs to the crawl database")
    p.add_argument("path", help="seed file, or folder of seed files (one URL per line)")
    p = add("generate", "cycle:cmd_generate", "select due URLs into a new segment; prints its path")
    p.add_argument("--top-n", type=int, default=None)
    p.add_argument("--partitions", type=int, default=None)
    p = add("fetch", "cycle:cmd_fetch", "fetch (and parse) a segment")
    p.add_argument("segment")
    p.add_argument("--partition", type=int, action="append", default=None)
    p.add_argument("--spark", action="store_true", help="run each partition as a Spark task on spark.master")
    p = add("parse", "parse:cmd_parse", "re-parse a fetched segment from its content")
    p.add_argument("segment")
    p = add("updatedb", "cycle:cmd_updatedb", "merge fetched segments into the crawl database")
    p.add_argument("segments", nargs="+")
    for name, help_ in (("invertlinks", "build the link database from segments"),
                        ("updatesegs", "write scores and anchors back into segments")):
        p = add(name, f"dbtools:cmd_{name}", help_)
        p.add_argument("segments", nargs="+")
    add("dedup", "dbtools:cmd_dedup", "mark pages whose content digest repeats")
    p = add("crawl", "cycle:cmd_crawl", "inject, then N rounds of generate/fetch/updatedb")
    p.add_argument("--seeds", default=None)
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--top-n", type=int, default=None)
    add("daemon", "daemon:cmd_daemon", "run the crawl cycle as a long-running service")

    p = add("readdb", "inspect:cmd_readdb", "read the crawl database")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stats", action="store_true")
    mode.add_argument("--dump", action="store_true")
    mode.add_argument("--url")
    p.add_argument("--json", action="store_true")
    p.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl")
    p.add_argument("--out", default=None)
    p.add_argument("--status", default=None, help="with --dump: only URLs in this status")
    p = add("readseg", "inspect:cmd_readseg", "read segments")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--list", action="store_true")
    mode.add_argument("--dump", metavar="SEGMENT")
    mode.add_argument("--get", nargs=2, metavar=("SEGMENT", "URL"))
    p.add_argument("--format", choices=["jsonl"], default="jsonl")
    p = add("readlinkdb", "dbtools:cmd_readlinkdb", "read the link database")
    p.add_argument("--url")
    p.add_argument("--dump", action="store_true")

    p = add("parse-check", "checks:cmd_parse_check", "show how a page is parsed")
    p.add_argument("target", help="URL to fetch, or FILE with --base")
    p.add_argument("--base", default=None)
    p.add_argument("--content-type", default=None)
    p = add("robots-check", "checks:cmd_robots_check", "check URLs against a robots.txt file")
    p.add_argument("robots_file")
    p.add_argument("urls_file")
    p.add_argument("--agent", required=True)
    p = add("normalize-check", "checks:cmd_normalize_check", "normalize URLs read from stdin")
    p.add_argument("--base", default=None)
    return parser


# The command modules that import neither pyarrow nor DuckDB: the checks read one URL, file or page.
_LIGHT_MODULES = frozenset(("checks",))


def _resolve(target: str, spark: bool, local: bool) -> Callable[[CrawlerConfig, Any], int]:
    # Imported on use, so `normalize-check` does not pay for DuckDB and aiohttp imports. Inside
    # deferred_store, aiohttp's import-time TLS contexts load the system store at their first handshake,
    # not on the way to the first request (crawler/protocols/trust.py). Unless the command runs Spark
    # (whose pandas objects pyarrow must recognize), pyarrow never imports pandas to probe what it
    # converts (crawler/pandas_probe.py), and with a local crawl_dir it loads no remote filesystem
    # (crawler/arrow_filesystems.py).
    from crawler.protocols.trust import deferred_store

    if local and not spark:
        from crawler import arrow_filesystems

        arrow_filesystems.hide()
    module, _, name = target.partition(":")
    with deferred_store():
        if module not in _LIGHT_MODULES:
            # pyarrow (and the numpy it loads) imported from here, a few frames deep, rather than ~30 imports
            # down the command module's: there numpy's typing modules call back and forth across the edge of
            # a 16 kB chunk of CPython 3.11's frame stack, which it maps and unmaps at each crossing (837
            # mmap/munmap pairs in a crawl's start-up; 12 with this import; docs/benchmarks.md).
            import pyarrow  # noqa: F401
        handler = getattr(importlib.import_module(f"crawler.commands.{module}"), name)
    if not spark:
        from crawler import pandas_probe

        pandas_probe.skip()
    return handler


def runs_spark(cfg: CrawlerConfig, args: argparse.Namespace) -> bool:
    """Whether the command runs Spark in this process: its jobs (``jobs.engine``), or ``fetch --spark``."""
    return cfg.jobs.engine == "spark" or bool(getattr(args, "spark", False))


def _load(args: argparse.Namespace) -> CrawlerConfig:
    from crawler.config import load_config

    path = args.config_sub or args.config
    return load_config(path, [*args.defines, *args.defines_sub])


def main(argv: Sequence[str] | None = None) -> int:
    """The program (``argv`` None: the process's own arguments, and the process ends when this returns)."""
    own_process = argv is None and gc.isenabled()
    if argv is None:
        # Arrow's buffers from the C library's malloc, not its default mimalloc (unless the user chose a pool):
        # mimalloc keeps the segments a part write or updatedb's batches freed, and the summed peak RSS of a
        # crawl of bench/realweb.py's web was ~50 MB lower with malloc (median of 3 each), the memory module's
        # trims then reaching Arrow's freed buffers too, at the same speed (docs/benchmarks.md). Set before
        # anything imports pyarrow; the fork server and the pool processes inherit it.
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
        # pyarrow imports numpy, whose OpenBLAS starts a thread per core that spins while it waits for work:
        # ~80 ms of CPU in every command (numpy's import alone, 0.17 against 0.09 CPU s here), on the core
        # the fork server's imports want at start-up. The crawler's one BLAS call (the SimHash's small product
        # of votes) is no slower on one thread (docs/benchmarks.md, "OpenBLAS's idle threads"); a user's value wins.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if own_process:
        # Start-up (imports, the config) makes ~70,000 objects that live as long as the process and next
        # to no garbage, yet the collector would go through them again and again meanwhile (~10 % of it).
        gc.disable()
    try:
        return _main(argv, own_process)
    finally:
        if argv is None:
            # The interpreter's exit collects the whole heap several times while it tears the modules
            # down (0.15 s of CPU after a crawl) though the heap is about to go anyway. Frozen objects
            # still die by reference count, and atexit handlers and stream flushes still run.
            gc.freeze()
        if own_process:
            gc.enable()


def _started() -> None:
    """Start-up is over: what it made is exempt from later collections (as memory.settle, without the
    full collection that would cost more than the few cycles it would free), and the collector runs again."""
    gc.freeze()
    gc.enable()


# The commands that may parse in a pool: they start its fork server first thing.
_POOL_COMMANDS = frozenset(("crawl", "fetch", "daemon"))


def _main(argv: Sequence[str] | None, own_process: bool = False) -> int:
    started = False
    try:
        args = build_parser().parse_args(argv)
        cfg = _load(args)
        if args.command in _POOL_COMMANDS:  # only these pay for importing multiprocessing's fork server
            from crawler.fetcher import forkserver

            if forkserver.wanted(cfg):  # its imports overlap this command's (crawler/fetcher/forkserver.py)
                started = forkserver.warm_up()
        from crawler.log import configure_logging
        from crawler.storage.workspace import open_workspace

        configure_logging(cfg.log)
        handler = _resolve(args.handler, runs_spark(cfg, args), parse_remote(cfg.crawl_dir) is None)
        if own_process:
            _started()
        # A remote crawl_dir stages what the command reads and writes (ACCESS); a local one runs as it is.
        with open_workspace(cfg).command(cfg, args, args.access) as run:
            return handler(run.cfg, run.args)
    except CrawlerError as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("crawler: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `crawler readdb --dump | head` is normal use, not an error.
        sys.stderr.close()
        return 0
    except Exception as exc:  # noqa: BLE001 - the last resort keeps the one-line contract
        import structlog

        structlog.get_logger().exception("crawler.internal_error")
        print(f"crawler: internal error: {exc.__class__.__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    finally:
        if started:
            forkserver.stop()
