"""A parse process's work for a page, counted in instructions: the same count run after run.

On this VM a crawl's wall and CPU move 10-30 % from run to run, so a change of a few percent in what a
parse process does cannot be resolved by crawls, nor by in-process timings when another VM on the host is
busy. valgrind's callgrind counts the instructions a process executes: the same count for the same binary,
input and environment, whatever else the machine does. This runs ``parsepool._job`` (what a parse process
does for a page: the parse, the MD5 digest, the WARC records, the rows, the links to follow) on real pages,
each framed and unpickled as the fetch process and `_JobReader` hand it over, under callgrind twice:
``--loops`` passes and two more. The difference is two warm passes (the shared link tables filled, as in a
crawl); divided by the pages, it is the instructions of a page's job, start-up and imports left out.

    .venv/bin/python bench/job_instructions.py [--pages 20] [--tree NAME=DIR ...] [--html DIR]

Pages: ``--pages`` of each of realsites.py's seven trees (prepared as it prepares them: downloaded once), or
every page under ``--html``. With ``--tree`` (repeatable) each source tree is counted in turn, e.g. the tree
before a change (``git worktree add /tmp/old HEAD``) and this one, and each is given against the first.
``--no-valgrind`` runs the passes without it and prints CPU microseconds a page instead (a quick look).

Caveats: valgrind hides the CPU's SHA extensions from OpenSSL, so the WARC records' SHA-1 counts far more
than it costs; an instruction is not a cycle (cache misses, the collector's walks over memory). Compare
trees with it, and take absolute costs from the crawl benches.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEVEN = 7  # realsites.SITES' first seven: the trees of the wget target


def pages(args: argparse.Namespace) -> list[tuple[str, bytes]]:
    """(url, body) of the pages counted, in a fixed order."""
    if args.html:
        root = Path(args.html)
        files = sorted(p for p in root.rglob("*.htm*") if p.is_file())
        return [(f"http://127.0.0.1:8080/{f.relative_to(root)}", f.read_bytes()) for f in files]
    return [(f"http://127.0.10.{n}:8080/{f.relative_to(root)}", f.read_bytes())
            for n, (root, files) in enumerate(tree_files(), 1) for f in files[:args.pages]]


def tree_files() -> list[tuple[Path, list[Path]]]:
    """(root, its HTML files in a fixed random order) of each of the seven trees, prepared as realsites.py does."""
    sys.path.insert(0, str(ROOT / "bench"))
    from realsites import SITES, prepare

    found = []
    for site in SITES[:SEVEN]:
        root = prepare(site)
        files = sorted(p for p in root.rglob("*.html") if p.is_file())
        random.Random(2).shuffle(files)
        found.append((root, files))
    return found


def counted_env(tree: Path) -> dict[str, str]:
    """The environment of a counted run of source tree ``tree``: the same hash seed and one BLAS thread each time."""
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}


def collected(stderr: str) -> int | None:
    """The instructions callgrind counted, from its summary on stderr."""
    found = re.search(r"Collected : (\d+)", stderr)
    return int(found.group(1)) if found else None


def worker(args: argparse.Namespace) -> None:
    """The passes, in a process whose crawler comes from PYTHONPATH (the tree counted)."""
    from crawler.config import load_config
    from crawler.fetcher import parsepool
    from crawler.parsers.dispatch import ParserDispatch
    from crawler.protocols.base import Response

    cfg = load_config(None, [])
    dispatch = ParserDispatch(cfg)
    jobs = []
    for key, (url, body) in enumerate(pages(args)):
        host = url.split("/")[2]
        response = Response(
            url=url, status=200, reason="OK", raw_body=body, body=body, peer_ip=host.split(":")[0], elapsed=0.002,
            headers=[("Server", "nginx/1.22.1"), ("Date", "Sun, 06 Dec 2026 04:00:00 GMT"),
                     ("Content-Type", "text/html"), ("Content-Length", str(len(body))),
                     ("Last-Modified", "Sat, 01 Jan 2022 00:00:00 GMT"), ("Connection", "keep-alive"),
                     ("ETag", '"61cf9980-8f3a"'), ("Accept-Ranges", "bytes")],
            request_headers=[("Host", host), ("User-Agent", "crawler/0.1"), ("Accept", "*/*"),
                             ("Accept-Encoding", "gzip, deflate")])
        head, *bodies = parsepool._page_job(key, url, response, "text/html", True, [], True)
        jobs.append((*pickle.loads(head)[:-1], *bodies))  # as _JobReader hands a job over
    # What a parse process does before its first job (named _tune_collector in the trees of 2026-12-06 before it).
    if tune := getattr(parsepool, "collect_for_pages", None) or getattr(parsepool, "_tune_collector", None):
        tune()
    started = time.process_time()
    for _ in range(args.loops):
        answers = [parsepool._job(dispatch, job, cfg.db.max_outlinks) for job in jobs]
        if failed := [(job[2], error) for job, (_, _, error) in zip(jobs, answers, strict=True) if error is not None]:
            raise SystemExit(f"{len(failed)} jobs failed, the first: {failed[0]}")
        for at in range(0, len(answers), 8):  # a batch's answer, as _parse_worker sends it
            pickle.dumps(answers[at:at + 8], protocol=5)
    print(f"pages {len(jobs)} cpu_us {1e6 * (time.process_time() - started) / max(args.loops * len(jobs), 1):.1f}")


def count(tree: Path, args: argparse.Namespace, loops: int) -> tuple[int, int]:
    """(instructions of a run of ``loops`` passes, pages) under callgrind."""
    with tempfile.TemporaryDirectory() as scratch:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/out", sys.executable, __file__,
               "--worker", "--loops", str(loops), "--pages", str(args.pages), *(["--html", args.html] if args.html else [])]
        done = subprocess.run(cmd, env=counted_env(tree), capture_output=True, text=True, check=False)
    instructions = collected(done.stderr)
    found = re.search(r"pages (\d+)", done.stdout)
    if done.returncode or instructions is None or not found:
        raise SystemExit(f"{tree}: the counted run failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return instructions, int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=20, help="pages of each of the seven trees")
    parser.add_argument("--html", help="count every page under this folder instead of the trees'")
    parser.add_argument("--loops", type=int, default=1, help="passes of the shorter counted run")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR", help="a source tree to count")
    parser.add_argument("--no-valgrind", action="store_true", help="CPU us a page instead, in this process's tree")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker or args.no_valgrind:
        if args.no_valgrind:
            sys.path.insert(0, str(ROOT))
            args.loops = max(args.loops, 3)
        worker(args)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is missing: apt-get install valgrind")
    pages(args)  # prepared once, before anything is counted
    trees = [tuple(spec.split("=", 1)) for spec in args.tree] or [("this", str(ROOT))]
    first = None
    for name, tree in trees:
        (short, n), (long, _) = count(Path(tree), args, args.loops), count(Path(tree), args, args.loops + 2)
        per_page = (long - short) / 2 / n
        first = first or per_page
        print(f"{name:12s} {per_page:12,.0f} instructions a page's job ({n} pages)  {per_page / first:.4f} of the first",
              flush=True)


if __name__ == "__main__":
    main()
