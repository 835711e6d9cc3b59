"""Crawler vs Scrapy vs the aiohttp floor on one generated web, in one run (issue: Performance).

Each contender runs as its own process, timed from outside (wall clock, user+sys
CPU and peak RSS from wait4), several runs in alternating order, medians reported.
Usage: make bench-compare   (or: .venv-bench/bin/python bench/compare.py --runs 3)
A/B of a change: --only old,new --tree old=DIR1 --tree new=DIR2 (two source trees, same web).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crawlargs import crawl_args, crawler_env  # noqa: E402
from nginx import Nginx  # noqa: E402
from observer import Origin, Report, combine, observe, read_nginx, table  # noqa: E402
from sitegen import generate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# BENCH_WORK: a separate folder (web, nginx, crawls) so two engineers' benches on one machine do not collide.
WORK = Path(os.environ.get("BENCH_WORK", ROOT / "bench" / ".work"))
# The crawler as a user installs it (`pip install .`, no extras): the dev extras bring pandas and numpy,
# which pyarrow imports into every process that converts rows (~0.35 s of CPU each); a user's install
# has neither. `make bench-compare` builds this virtualenv.
CRAWLER = ROOT / ".venv-bench-crawler" / "bin" / "crawler"
PEERS = ROOT / "bench" / "peers"


@dataclass
class Run:
    name: str
    wall: float
    cpu: float
    rss_mb: float
    pages: int
    per_second: dict[int, int] = field(default_factory=dict)
    server_cpu: float = 0.0  # nginx's CPU during the run: the other tenant of the cores

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.wall if self.wall else 0.0

    @property
    def cpu_per_1000(self) -> float:
        return 1000 * self.cpu / self.pages if self.pages else float("nan")

    @property
    def server_cpu_per_1000(self) -> float:
        return 1000 * self.server_cpu / self.pages if self.pages else float("nan")


# Linux carries a process's peak RSS across fork and exec: a contender started straight from this
# process (hundreds of MB after reading the crawl's tables) would report at least our size. So a
# small process starts it and reports its wait4 figures (peak RSS: its largest process).
_SHIM = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"cpu": usage.ru_utime + usage.ru_stime, "rss_kb": usage.ru_maxrss}, out)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def timed(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Wall seconds, user+sys CPU seconds and peak RSS (MB) of one child process."""
    figures = log.with_suffix(".usage.json")
    with open(log, "w") as out:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", _SHIM, str(figures), *cmd],
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                env={**os.environ, **env} if env else None)
        status = proc.wait()
        wall = time.monotonic() - start
    if status != 0:
        raise RuntimeError(f"{cmd[0]} failed (exit {status}); see {log}")
    usage = json.loads(figures.read_text())
    return wall, usage["cpu"], usage["rss_kb"] / 1024


def _histogram(times: list[float]) -> dict[int, int]:
    if not times:
        return {}
    start = min(times)
    return dict(sorted(Counter(int(t - start) for t in times).items()))


# "crawler": the shipped defaults (fetcher.parse_processes: auto, a parse process for every core but the
# fetch process's); "crawler-all": parse processes for every core but one, named (the same as auto, and
# at least one on a 1-core machine); "crawler-one": one fetch process doing everything (parse_processes 0).
CRAWLER_VARIANTS = {
    "crawler": [],
    "crawler-all": ["-D", f"fetcher.parse_processes={max(1, (os.cpu_count() or 2) - 1)}"],
    "crawler-one": ["-D", "fetcher.parse_processes=0"],
}


# --tree NAME=DIR: contender NAME is `crawler` run from the source tree DIR (its crawler/ and config.yaml,
# e.g. from `git archive HEAD crawler config.yaml | tar -x -C DIR`), for A/B of changes on one web. The
# `crawler` script puts .venv/bin, not the checkout, first on sys.path, so PYTHONPATH wins over the
# editable install.
TREES: dict[str, str] = {}


def _variant(name: str) -> list[str]:
    """A tree contender named ``*-all`` (``--tree new-all=DIR``) runs as crawler-all."""
    return CRAWLER_VARIANTS.get(name) or (CRAWLER_VARIANTS["crawler-all"] if name.endswith("-all") else [])


def run_crawler(seeds: Path, concurrency: int, tag: str, name: str = "crawler") -> tuple[Run, list[str]]:
    crawl_dir = WORK / f"crawl-{name}-{tag}"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    tree = TREES.get(name)
    config = ["-c", str(Path(tree) / "config.yaml")] if tree else []  # the tree's own keys
    cmd = [str(CRAWLER), *crawl_args(seeds, crawl_dir, concurrency), *config, *_variant(name)]
    env = crawler_env(tree or ROOT)  # the `crawler` script puts its venv first; PYTHONPATH wins
    wall, cpu, rss = timed(cmd, WORK / f"{name}-{tag}.log", env)
    table = pq.ParquetDataset(sorted(crawl_dir.glob("segments/*/fetcher/part-*.parquet"))).read(
        columns=["url", "status", "fetch_time"])
    rows = table.to_pylist()
    # Pages found = distinct URLs fetched with 2xx; the floor gets every URL the crawler requested
    # (404s and redirect sources included), so both do the same network work.
    ok = {r["url"] for r in rows if r["status"] == "success"}
    requested = sorted({r["url"] for r in rows if r["status"] not in ("robots_denied",)})
    hist = _histogram([r["fetch_time"].timestamp() for r in rows if r["status"] == "success"])
    return Run(name, wall, cpu, rss, len(ok), hist), requested


def run_scrapy(seeds: Path, concurrency: int, tag: str) -> Run:
    out = WORK / f"scrapy-{tag}.jsonl"
    out.unlink(missing_ok=True)
    wall, cpu, rss = timed([sys.executable, str(PEERS / "scrapy_spider.py"), str(seeds), str(out), str(concurrency)],
                           WORK / f"scrapy-{tag}.log")
    items = [json.loads(line) for line in out.read_text().splitlines()]
    first: dict[str, float] = {}
    for item in items:
        first.setdefault(item["url"], item["t"])
    return Run("scrapy", wall, cpu, rss, len(first), _histogram(list(first.values())))


def run_floor(urls: Path, concurrency: int, tag: str) -> Run:
    log = WORK / f"floor-{tag}.log"
    wall, cpu, rss = timed([sys.executable, str(PEERS / "floor.py"), str(urls), str(concurrency), "2"], log)
    result = json.loads(log.read_text().strip().splitlines()[-1])
    return Run("floor", wall, cpu, rss, result["pages"], {int(k): v for k, v in result["per_second"].items()})


def observed(log: Path, offset: int, web: Path, port: int, agent: str, name: str) -> Report:
    """The observer's verdict on one run: the access log's lines since ``offset``, judged by what each host
    served (its robots.txt) and the bench's promises (2 in flight per host, no delay)."""
    with open(log, encoding="utf-8") as fh:
        fh.seek(offset)
        requests = list(read_nginx(fh, str(log)))
    origins = {f"http://{d.name}:{port}": Origin(robots=(d / "robots.txt").read_text(), in_flight=2)
               for d in web.iterdir() if d.is_dir()}
    total, _ = observe(requests, origins, agent=agent, min_delay=0.0, in_flight=2, name=name)
    return total


def median_row(runs: list[Run]) -> dict[str, float]:
    return {
        "pages_per_second": statistics.median(r.pages_per_second for r in runs),
        "cpu_per_1000": statistics.median(r.cpu_per_1000 for r in runs),
        "rss_mb": statistics.median(r.rss_mb for r in runs),
        "pages": statistics.median(r.pages for r in runs),
        "wall": statistics.median(r.wall for r in runs),
        "server_cpu_per_1000": statistics.median(r.server_cpu_per_1000 for r in runs),
    }


def plot(series: dict[str, dict[int, int]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    for name, hist in series.items():
        if hist:
            xs = list(range(max(hist) + 1))
            ax.plot(xs, [hist.get(x, 0) for x in xs], label=name)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("pages/s")
    ax.set_title("Pages per second over one run (same web, same machine)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=120)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", default="crawler,crawler-all,scrapy,floor")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "bench-compare.png")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                        help="contender NAME: the crawler from source tree DIR (name it in --only)")
    args = parser.parse_args()
    for spec in args.tree:
        name, _, tree = spec.partition("=")
        TREES[name] = str(Path(tree).resolve())
    WORK.mkdir(parents=True, exist_ok=True)
    seeds = WORK / "seeds.txt"
    seeds.write_text("\n".join(generate(WORK / "web", args.hosts, args.pages, args.port, args.seed)) + "\n")
    only = args.only.split(",")
    results: dict[str, list[Run]] = {name: [] for name in only}
    verdicts: dict[str, list[Report]] = {name: [] for name in only}
    access_log = WORK / "nginx" / "access.log"
    access_log.unlink(missing_ok=True)
    with Nginx(WORK / "web", args.port, WORK / "nginx", access_log=access_log) as server:
        urls_file = WORK / "urls.txt"
        urls_file.unlink(missing_ok=True)  # from another web size or seed: the floor must not use it
        for i in range(args.runs):
            order = only[i % len(only):] + only[: i % len(only)]
            for name in order:
                tag = f"{i}"
                served_before = server.cpu_seconds()
                logged_before = access_log.stat().st_size
                if name in CRAWLER_VARIANTS or name in TREES:
                    run, urls = run_crawler(seeds, args.concurrency, tag, name)
                    urls_file.write_text("\n".join(urls) + "\n")
                elif name == "scrapy":
                    run = run_scrapy(seeds, args.concurrency, tag)
                else:
                    if not urls_file.exists():
                        _, urls = run_crawler(seeds, args.concurrency, "urls")
                        urls_file.write_text("\n".join(urls) + "\n")
                        served_before = server.cpu_seconds()
                        logged_before = access_log.stat().st_size
                    run = run_floor(urls_file, args.concurrency, tag)
                run.server_cpu = server.cpu_seconds() - served_before
                results[name].append(run)
                agent = "scrapy" if name == "scrapy" else "crawler"
                verdicts[name].append(observed(access_log, logged_before, WORK / "web", args.port, agent, name))
                print(f"run {i} {name:8s} {run.pages:6d} pages {run.wall:7.2f}s {run.pages_per_second:7.1f} p/s "
                      f"{run.cpu_per_1000:6.2f} cpu-s/1000 {run.rss_mb:7.1f} MB "
                      f"server {run.server_cpu_per_1000:5.2f} cpu-s/1000", flush=True)
    rows = {name: median_row(runs) for name, runs in results.items() if runs}
    print("\n| contender | pages/s | CPU s / 1000 pages | peak RSS MB | pages found | wall s | nginx CPU s / 1000 pages |")
    print("|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['pages_per_second']:.1f} | {row['cpu_per_1000']:.2f} | {row['rss_mb']:.0f} | "
              f"{row['pages']:.0f} | {row['wall']:.1f} | {row['server_cpu_per_1000']:.2f} |")
    for name in (n for n in rows if n in CRAWLER_VARIANTS or n in TREES):
        c = rows[name]
        if "scrapy" in rows:
            s = rows["scrapy"]
            print(f"\n{name}/scrapy pages/s: {c['pages_per_second'] / s['pages_per_second']:.2f}x; "
                  f"CPU per page: {c['cpu_per_1000'] / s['cpu_per_1000']:.2f} of Scrapy's")
        if "floor" in rows:
            print(f"{name}/floor pages/s: {c['pages_per_second'] / rows['floor']['pages_per_second']:.2f}")
    # Politeness as nginx saw it (bench/observer.py); the floor asks no robots.txt, so its pages all count
    # as "before robots.txt": it bounds speed, not manners.
    print(f"\nAs the server saw it, summed over {args.runs} run(s):\n")
    print(table(combine(name, reports) for name, reports in verdicts.items() if reports))
    plot({name: runs[-1].per_second for name, runs in results.items() if runs}, args.plot)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
