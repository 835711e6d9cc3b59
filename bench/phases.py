"""Where one `crawl` of a real documentation tree spends its time, phase by phase: an A/B of source trees.

    .venv-bench-crawler/bin/python bench/phases.py --site django --runs 8 --tree before=DIR1 --tree after=DIR2

The trees and the nginx of bench/realsites.py; each run is realsites.py's crawl of one site (the shipped
defaults but the loopback bench's settings), at log level info, the source trees alternating (A B B A A B
...) so that a drift of the machine's speed falls on each. Per run, from the crawl's own log: start-up
(process start to inject.done), generate, fetch set-up (the pool's start, the known URLs),
fetch, updatedb, invertlinks, and the rest (later rounds, the exit); the run's user+sys CPU (wait4, the
crawl's processes); and the machine's busy share during start-up and during the fetches (/proc/stat,
every 50 ms): a fetch near 100 % is CPU-bound, and what start-up leaves idle is what work moved there
can use. Printed: the median of each per tree, and the last tree's against the first's.

Why a script of its own: this VM's speed moves 10-30 % from one run to the next, so a change of 0.1-0.3 s
in a crawl's fixed costs is invisible in a single run of the whole bench, and shows only in interleaved
medians of the phase it touches (docs/benchmarks.md, "A crawl's phases on the real trees").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crawlargs import crawler_env, log_time  # noqa: E402
from proctree import BusySampler  # noqa: E402
from realsites import CRAWLER, ROOT, SITES, WORK, Sites, address, crawl_command, prepare  # noqa: E402

# Each phase ends with the first event named (the log's own timestamps); the rest runs to the process's end.
PHASES = [("start-up", "inject.done"), ("generate", "generate.done"), ("fetch set-up", "fetch.start"),
          ("fetch", "fetch.done"), ("updatedb", "updatedb.done"), ("invertlinks", "invertlinks.done")]


def one_crawl(tree: Path, seed: str, tag: str, args: argparse.Namespace) -> dict[str, float]:
    crawl = WORK / f"phases-{tag}"
    cmd = [a if a != "log.level=warning" else "log.level=info" for a in crawl_command(CRAWLER, tree, crawl, seed, args)]
    log = crawl.with_suffix(".log")
    with BusySampler() as sampler, open(log, "w") as err:
        started = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=WORK,
                                env={**os.environ, **crawler_env(tree)})
        _, status, usage = os.wait4(proc.pid, 0)
        ended = time.time()
    if status:
        raise RuntimeError(f"the crawl failed (status {status}); see {log}")
    first: dict[str, float] = {}
    fetches: list[tuple[float, float]] = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            first.setdefault(event["event"], log_time(event))
            if event["event"] == "fetch.start":
                fetches.append((log_time(event), ended))
            elif event["event"] == "fetch.done" and fetches:
                fetches[-1] = (fetches[-1][0], log_time(event))
    row, last = {}, started
    for name, event in PHASES:
        at = first.get(event, last)
        row[name], last = at - last, at
    row["rest"] = ended - last
    row["wall"] = ended - started
    row["CPU s"] = usage.ru_utime + usage.ru_stime
    row["busy % start-up"] = 100 * (sampler.busy(started, first.get("inject.done", started)) or 0.0)
    busy = [(b - a, sampler.busy(a, b)) for a, b in fetches]
    seconds = sum(length for length, share in busy if share is not None)
    row["busy % fetch"] = 100 * sum(length * share for length, share in busy if share is not None) / max(seconds, 1e-9)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", default="django", help="one of realsites.py's SITES")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                        help="a source tree to crawl with (its crawler/ and config.yaml); default: this one")
    parser.add_argument("--runs", type=int, default=6, help="runs per tree")
    parser.add_argument("--port", type=int, default=18395)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("-D", dest="define", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    trees = [(name, Path(path).resolve()) for name, _, path in (t.partition("=") for t in args.tree)]
    trees = trees or [("this", ROOT)]
    site = next((s for s in SITES if s.name == args.site), None)
    if site is None:
        raise SystemExit(f"--site: one of {', '.join(s.name for s in SITES)}")
    WORK.mkdir(parents=True, exist_ok=True)
    served = [(s, prepare(s)) for s in SITES]
    seed = f"http://{address(SITES.index(site))}:{args.port}/"
    rows: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    with Sites(served, args.port, WORK / "nginx-phases"):
        for i in range(args.runs):
            for name, tree in (trees if i % 2 == 0 else trees[::-1]):
                rows[name].append(one_crawl(tree, seed, name, args))
                print(f"run {i} {name}: " + " ".join(f"{k} {v:.2f}" for k, v in rows[name][-1].items()), flush=True)
    columns = list(rows[trees[0][0]][0])
    medians = {name: {c: statistics.median(r[c] for r in runs) for c in columns} for name, runs in rows.items()}
    print(f"\n{site.name}, medians of {args.runs} runs each")
    print(f"{'':18s}" + "".join(f"{name:>12s}" for name, _ in trees)
          + (f"{'change':>10s}" if len(trees) > 1 else ""))
    for c in columns:
        line = f"{c:18s}" + "".join(f"{medians[name][c]:12.3f}" for name, _ in trees)
        if len(trees) > 1:
            line += f"{medians[trees[-1][0]][c] - medians[trees[0][0]][c]:+10.3f}"
        print(line)


if __name__ == "__main__":
    main()
