"""Where one `crawl` of a real documentation tree spends its time, phase by phase: an A/B of source trees.

    .venv-bench-crawler/bin/python bench/phases.py --site django --runs 8 --tree before=DIR1 --tree after=DIR2
    .venv-bench-crawler/bin/python bench/phases.py --site all --runs 5 --tree nice0=. --tree nice10=. \
        --set nice0:fetcher.parse_nice=0

The trees and the nginx of bench/realsites.py; each run is realsites.py's crawl of one site (the shipped
defaults but the loopback bench's settings), at log level info, the source trees alternating (A B B A A B
...) so that a drift of the machine's speed falls on each. Per run, from the crawl's own log: start-up
(process start to inject.done), generate, fetch set-up (the pool's start, the known URLs),
fetch, updatedb, invertlinks, and the rest (later rounds, the exit); the run's user+sys CPU (wait4, the
crawl's processes); and the machine's busy share during start-up and during the fetches (/proc/stat,
every 50 ms): a fetch near 100 % is CPU-bound, and what start-up leaves idle is what work moved there
can use. Printed: the median of each per tree, and the last tree's against the first's. With several sites
(``--site`` again, or ``all``) each site's runs alternate the trees as above, and a last table sums each
tree's median walls over the sites and counts the runs where the last tree was the faster of the pair: a
change of a few per cent over the whole bench shows there, where one run of realsites.py cannot resolve
it. ``--set NAME:KEY=VALUE`` gives one tree a config value of its own (the same source twice, one key
apart: docs/benchmarks.md, "The parse processes run at a lower priority").

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
from realsites import CRAWLER, ROOT, SITES, WORK, Sites, address, at_info, crawl_command, prepare  # noqa: E402

# Each phase ends with the first event named (the log's own timestamps); the rest runs to the process's end.
PHASES = [("start-up", "inject.done"), ("generate", "generate.done"), ("fetch set-up", "fetch.start"),
          ("fetch", "fetch.done"), ("updatedb", "updatedb.done"), ("invertlinks", "invertlinks.done")]


def one_crawl(tree: Path, seed: str, tag: str, args: argparse.Namespace, own: list[str]) -> dict[str, float]:
    crawl = WORK / f"phases-{tag}"
    settings = argparse.Namespace(**{**vars(args), "define": [*args.define, *own]})
    cmd = at_info(crawl_command(CRAWLER, tree, crawl, seed, settings))
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
    parser.add_argument("--site", action="append", default=[], help="one of realsites.py's SITES, or all "
                        "(again for more; default: django)")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                        help="a source tree to crawl with (its crawler/ and config.yaml); default: this one")
    parser.add_argument("--runs", type=int, default=6, help="runs per tree")
    parser.add_argument("--port", type=int, default=18395)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("-D", dest="define", action="append", default=[], metavar="KEY=VALUE",
                        help="a config value for every tree")
    parser.add_argument("--set", action="append", default=[], metavar="NAME:KEY=VALUE",
                        help="a config value for tree NAME only")
    args = parser.parse_args()
    trees = [(name, Path(path).resolve()) for name, _, path in (t.partition("=") for t in args.tree)]
    trees = trees or [("this", ROOT)]
    own: dict[str, list[str]] = {name: [] for name, _ in trees}
    for item in args.set:
        name, _, setting = item.partition(":")
        if name not in own or "=" not in setting:
            raise SystemExit(f"--set {item}: NAME:KEY=VALUE, NAME one of the trees ({', '.join(own)})")
        own[name].append(setting)
    names = [s.name for s in SITES]
    wanted = names if "all" in args.site else (args.site or ["django"])
    if unknown := [name for name in wanted if name not in names]:
        raise SystemExit(f"--site {unknown[0]}: one of {', '.join(names)}, or all")
    WORK.mkdir(parents=True, exist_ok=True)
    served = [(s, prepare(s)) for s in SITES]
    walls: dict[str, dict[str, list[float]]] = {name: {} for name, _ in trees}
    with Sites(served, args.port, WORK / "nginx-phases"):
        for site_name in wanted:
            seed = f"http://{address(names.index(site_name))}:{args.port}/"
            rows: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
            for i in range(args.runs):
                for name, tree in (trees if i % 2 == 0 else trees[::-1]):
                    rows[name].append(one_crawl(tree, seed, name, args, own[name]))
                    print(f"{site_name} run {i} {name}: " + " ".join(f"{k} {v:.2f}" for k, v in rows[name][-1].items()),
                          flush=True)
            print_medians(site_name, trees, rows, args.runs)
            for name, runs in rows.items():
                walls[name][site_name] = [r["wall"] for r in runs]
    if len(wanted) > 1:
        print_sums(trees, walls, args.runs)


def print_medians(site: str, trees: list[tuple[str, Path]], rows: dict[str, list[dict[str, float]]], runs: int) -> None:
    columns = list(rows[trees[0][0]][0])
    medians = {name: {c: statistics.median(r[c] for r in runs_) for c in columns} for name, runs_ in rows.items()}
    print(f"\n{site}, medians of {runs} runs each")
    print(f"{'':18s}" + "".join(f"{name:>12s}" for name, _ in trees)
          + (f"{'change':>10s}" if len(trees) > 1 else ""))
    for c in columns:
        line = f"{c:18s}" + "".join(f"{medians[name][c]:12.3f}" for name, _ in trees)
        if len(trees) > 1:
            line += f"{medians[trees[-1][0]][c] - medians[trees[0][0]][c]:+10.3f}"
        print(line)
    print()


def print_sums(trees: list[tuple[str, Path]], walls: dict[str, dict[str, list[float]]], runs: int) -> None:
    """Each tree's median walls summed over the sites; the pairs (a site's run i) where the last tree was faster."""
    first, last = trees[0][0], trees[-1][0]
    sums = {name: sum(statistics.median(w) for w in by_site.values()) for name, by_site in walls.items()}
    pairs = [(a, b) for site in walls[first] for a, b in zip(walls[first][site], walls[last][site], strict=True)]
    print(f"all {len(walls[first])} sites, the sum of each site's median wall ({runs} runs each)")
    print("".join(f"{name:>12s}" for name, _ in trees) + (f"{'change':>10s}" if len(trees) > 1 else ""))
    line = "".join(f"{sums[name]:12.3f}" for name, _ in trees)
    if len(trees) > 1:
        line += f"{100 * (sums[last] / sums[first] - 1):+9.1f}%"
        line += f"   {last} faster in {sum(b < a for a, b in pairs)} of {len(pairs)} pairs"
    print(line)


if __name__ == "__main__":
    main()
