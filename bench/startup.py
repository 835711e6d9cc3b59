"""The fixed start-up cost of `crawler crawl` and of a light command, trees interleaved run by run.

A four-page site served on loopback from a temp folder; per tree and run, a two-round `crawl` from
scratch (process start to its `inject.done` line, to its first `fetch.start`, the whole run's wall and
CPU, children included) and a `normalize-check` of one URL. The trees take turns, the first of a run
changing from run to run, so a shared machine's load falls on each alike; medians are printed.

    .venv/bin/python bench/startup.py --runs 9 before=/tmp/before after=.
    .venv/bin/python bench/startup.py --pyc-prefix /tmp/pyc before=/tmp/before after=.

--pyc-prefix writes and reads bytecode under that folder (PYTHONPYCACHEPREFIX, PYTHONDONTWRITEBYTECODE
dropped), as a user's install has it; without it the environment decides (with PYTHONDONTWRITEBYTECODE
set and no __pycache__ in the tree, every process compiles the crawler's modules from source).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import http.server
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRAWLER = ROOT / ".venv-bench-crawler" / "bin" / "crawler"  # as compare.py: the crawler as a user installs it
MEASURES = ("inject.done", "first fetch.start", "crawl wall", "crawl CPU", "normalize-check wall", "normalize-check CPU")
PAGE = "<html><head><title>p{n}</title></head><body><a href='p1.html'>1</a> <a href='p2.html'>2</a> <a href='p3.html'>3</a></body></html>"


@contextlib.contextmanager
def served_site(folder: Path) -> Iterator[str]:
    for n in (1, 2, 3):
        (folder / f"p{n}.html").write_text(PAGE.format(n=n))
    shutil.copy(folder / "p1.html", folder / "index.html")
    handler = functools.partial(_QuietHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


def _run(argv: list[str], env: dict[str, str], **kwargs: object) -> tuple[float, float, float, str]:
    """(start time, wall s, CPU s of the process and its children, stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    proc = subprocess.run(argv, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{argv[1]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return start, wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, proc.stderr


def _first_events(stderr: str, start: float) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in stderr.splitlines():
        event = json.loads(line)
        key = "first fetch.start" if event["event"] == "fetch.start" else event["event"]
        if key in MEASURES and key not in found:
            stamp = datetime.datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
            found[key] = stamp - start
    return found


def measure(crawler: Path, tree: str, env: dict[str, str], work: Path, seeds: Path, extra: list[str]) -> dict[str, float]:
    env = {**env, "PYTHONPATH": tree}
    crawl_dir = work / "crawl"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    start, wall, cpu, stderr = _run(
        [str(crawler), "crawl", "--seeds", str(seeds), "--rounds", "2", "-D", f"crawl_dir={crawl_dir}",
         "-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0", *extra], env, cwd=work)
    row = {**_first_events(stderr, start), "crawl wall": wall, "crawl CPU": cpu}
    _, wall, cpu, _ = _run([str(crawler), "normalize-check"], env, input="http://a.example/x\n", cwd=work)
    return {**row, "normalize-check wall": wall, "normalize-check CPU": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", metavar="LABEL=DIR", help="source trees (PYTHONPATH) to compare")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--crawler", type=Path, default=CRAWLER)
    parser.add_argument("--pyc-prefix", default=None, help="bytecode cache folder, as an install has one")
    parser.add_argument("--extra", default="", help="more crawl arguments, e.g. '-D fetcher.parse_pool_min_entries=0'")
    args = parser.parse_args()
    trees = [t.split("=", 1) for t in args.trees]
    env = dict(os.environ)
    if args.pyc_prefix:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = args.pyc_prefix
    results = {label: {m: [] for m in MEASURES} for label, _ in trees}
    with tempfile.TemporaryDirectory() as tmp, served_site(Path(tmp)) as url:
        work = Path(tmp) / "work"
        work.mkdir()
        seeds = work / "seeds.txt"
        seeds.write_text(url + "\n")
        if args.pyc_prefix:
            for _, tree in trees:  # writes the bytecode: not measured
                measure(args.crawler, str(Path(tree).resolve()), env, work, seeds, args.extra.split())
        for run in range(args.runs):
            for label, tree in trees[run % len(trees):] + trees[:run % len(trees)]:  # each takes each turn
                row = measure(args.crawler, str(Path(tree).resolve()), env, work, seeds, args.extra.split())
                for key, value in row.items():
                    results[label][key].append(value)
    print(f"| ms (median of {args.runs}) | " + " | ".join(label for label, _ in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for m in MEASURES:
        print(f"| {m} | " + " | ".join(f"{statistics.median(results[label][m]) * 1000:.0f}" for label, _ in trees) + " |")


if __name__ == "__main__":
    main()
