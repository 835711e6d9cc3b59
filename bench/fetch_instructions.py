"""The fetch process's work for a page, counted in instructions: bench/job_instructions.py's count for the other
side of the pipe.

On the real-page web the fetch process spends nearly half a crawl's CPU (docs/benchmarks.md, the sixteenth
stop), and crawls on this VM move 10-30 % from run to run: a change of a few percent in it cannot be resolved
by crawls. This runs `crawler fetch` of a segment under valgrind's callgrind (`--trace-children=no`: the parse
processes, exec'd by their fork server, and the sites' servers run natively and are not counted), twice: a
segment of ``--pages`` pages of each site, and one of three times as many. The difference over the extra pages
is a page's fetch in instructions: the request and response, the decoding, the hand-over to a parse process and
its answer, the records and the parts. Start-up, imports and the segment's set-up cancel out. Two trees counted
in one invocation differ by ~0.2 % when they are the same code (1,462,492 and 1,465,307). Between invocations
the count once moved by 4 % (1.40 against 1.46 million instructions a page, one tree), with another valgrind beside
it (not pinned down; how a body's bytes fall into reads, and so what is copied, depends on how fast the servers
and the fetch run). So compare trees within one invocation (``--tree`` twice or more), not against a figure from
another run.

    .venv/bin/python bench/fetch_instructions.py [--pages 30] [--tree NAME=DIR ...] [--html DIR]

Sites: realsites.py's seven trees (prepared as it prepares them: downloaded once), each served from its own
loopback address by crawler/devserver.py in a process of its own, its pages taken in a fixed random order; or
every page under ``--html``, one site. Segments are generated once, by this checkout, and each run fetches a
fresh copy. With ``--tree`` (repeatable) each source tree is counted in turn (PYTHONPATH), e.g. the tree before
a change (``git worktree add /tmp/old HEAD``) and this one, each given against the first. ``--no-valgrind``
fetches natively and prints the CPU seconds of the fetch and its parse processes instead (a quick look).

Caveats: under valgrind the fetch process runs ~40x slower while its parse processes do not, so they always
keep up and answer page by page; kernel time (the sockets' and pipes' syscalls) is not counted. Compare trees
with it, and take absolute costs from the crawl benches.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
from job_instructions import collected, counted_env, tree_files  # this folder: the script's own

ROOT = Path(__file__).resolve().parent.parent
LARGER = 3  # the second segment's pages, in multiples of the first's
# The real-site benches' loopback settings (bench/crawlargs.py), one round of the segment's own URLs only, and
# the parse pool from the first page, as a large crawl has it. Parts are cut by their records and bytes alone,
# and progress is not logged: what runs by the clock would run more often in the slower counted runs.
SETTINGS = ["-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0", "-D", "fetcher.per_host_concurrency=2",
            "-D", "fetcher.concurrency=256", "-D", "fetcher.follow_depth=0", "-D", "fetcher.parse_pool_min_entries=0",
            "-D", "fetcher.commit_interval=1h", "-D", "fetcher.progress_interval=1h", "-D", "log.level=warning",
            "-D", "log.format=json"]


def sites(args: argparse.Namespace) -> list[tuple[Path, list[Path]]]:
    """(root, its pages in the order they are taken) of each site served: the seven trees in job_instructions.py's
    order, or every page under ``--html``."""
    if args.html:
        root = Path(args.html).resolve()
        return [(root, sorted(p for p in root.rglob("*.htm*") if p.is_file()))]
    return [(root.resolve(), files) for root, files in tree_files()]


@contextlib.contextmanager
def served(roots: list[Path], scratch: Path) -> Iterator[list[str]]:
    """Each root served by crawler/devserver.py on 127.0.11.N; yields their base URLs."""
    procs, bases = [], []
    try:
        for n, root in enumerate(roots, 1):
            port_file = scratch / f"port-{n}"
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "crawler.devserver", "--root", str(root), "--host", f"127.0.11.{n}", "--port", "0",
                 "--port-file", str(port_file)], cwd=ROOT, stderr=subprocess.DEVNULL))
            deadline = time.monotonic() + 20
            while not (port_file.exists() and port_file.read_text().strip()):
                if time.monotonic() > deadline or procs[-1].poll() is not None:
                    raise SystemExit(f"the server of {root} did not start")
                time.sleep(0.05)
            bases.append(f"http://127.0.11.{n}:{port_file.read_text().strip()}/")
        yield bases
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()


def crawler(*argv: str) -> list[str]:
    """The command line of `crawler`, from whichever tree PYTHONPATH names."""
    return [sys.executable, "-m", "crawler", *argv]


def make_segment(urls: list[str], crawl: Path) -> Path:
    """A crawl folder whose one segment lists ``urls``, built by this checkout."""
    seeds = crawl.with_suffix(".seeds")
    seeds.write_text("".join(f"{u}\n" for u in urls))
    config = ["-c", str(ROOT / "config.yaml"), *SETTINGS, "-D", f"crawl_dir={crawl}"]
    env = counted_env(ROOT)
    subprocess.run(crawler("inject", str(seeds), *config), check=True, env=env, cwd=ROOT)
    made = subprocess.run(crawler("generate", "--top-n", str(len(urls) + 1000), *config), check=True, env=env,
                          cwd=ROOT, capture_output=True, text=True)
    return Path(made.stdout.strip().splitlines()[-1])


def fetch(tree: Path, crawl: Path, segment: Path, scratch: Path, urls: int, valgrind: bool) -> tuple[float, int]:
    """Instructions (or, without valgrind, CPU seconds with the parse processes) of one fetch of a fresh copy of
    a segment of ``urls`` URLs, and the pages it fetched."""
    run = scratch / "run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(crawl, run)
    seg = run / segment.relative_to(crawl)
    cmd = crawler("fetch", str(seg), "-c", str(ROOT / "config.yaml"), *SETTINGS, "-D", f"crawl_dir={run}")
    if valgrind:
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=no", f"--callgrind-out-file={scratch}/out", *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, env=counted_env(tree), capture_output=True, text=True, check=False, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    fetched = sum(1 for row in pq.ParquetDataset(sorted((seg / "fetcher").glob("part-*.parquet"))).read(
        columns=["status"]).column(0).to_pylist() if row == "success") if done.returncode == 0 else 0
    if done.returncode or not fetched:
        raise SystemExit(f"{tree}: the fetch of {urls} URLs failed:\n{done.stderr[-2000:]}")
    if not valgrind:
        return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), fetched
    instructions = collected(done.stderr)
    if instructions is None:
        raise SystemExit(f"{tree}: valgrind gave no count:\n{done.stderr[-2000:]}")
    return float(instructions), fetched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=30, help="pages of each site in the smaller segment")
    parser.add_argument("--html", help="serve every page under this folder as the one site instead")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR", help="a source tree to count")
    parser.add_argument("--no-valgrind", action="store_true", help="CPU seconds of one native fetch of each segment")
    parser.add_argument("--keep", metavar="DIR", help="keep each counted run's callgrind output here (callgrind_annotate)")
    args = parser.parse_args()
    valgrind = not args.no_valgrind
    if valgrind and shutil.which("valgrind") is None:
        raise SystemExit("valgrind is missing: apt-get install valgrind")
    trees = [tuple(spec.split("=", 1)) for spec in args.tree] or [("this", str(ROOT))]
    found = sites(args)
    with tempfile.TemporaryDirectory(prefix="fetch-instructions-") as tmp:
        scratch = Path(tmp)
        with served([root for root, _ in found], scratch) as bases:
            # Each site's first pages, then three times as many (fewer where a site has fewer pages).
            small = [max(1, min(args.pages, len(pages) // LARGER)) for _, pages in found]
            segments = []
            for times in (1, LARGER):
                urls = [base + page.relative_to(root).as_posix()
                        for base, (root, pages), n in zip(bases, found, small, strict=True) for page in pages[:n * times]]
                crawl = scratch / f"crawl-{times}"
                segments.append((crawl, make_segment(urls, crawl), len(urls)))
            first = None
            for name, tree in trees:
                figures = []
                for times, (crawl, seg, n) in zip((1, LARGER), segments, strict=False):
                    figures.append(fetch(Path(tree), crawl, seg, scratch, n, valgrind))
                    if args.keep and valgrind:
                        Path(args.keep).mkdir(parents=True, exist_ok=True)
                        shutil.copy(scratch / "out", Path(args.keep) / f"{name}-{times}.out")
                if not valgrind:
                    print(f"{name:12s} " + "  ".join(f"{n} URLs {got} pages {cpu:.2f} CPU s" for (_, _, n), (cpu, got)
                                                     in zip(segments, figures, strict=True)), flush=True)
                    continue
                (small, got_small), (large, got_large) = figures
                per_page = (large - small) / max(got_large - got_small, 1)
                first = first or per_page
                print(f"{name:12s} {per_page:12,.0f} instructions a page's fetch ({got_large - got_small} pages)  "
                      f"{per_page / first:.4f} of the first", flush=True)


if __name__ == "__main__":
    main()
