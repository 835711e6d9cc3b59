"""Thread CPU of the part writer's steps and of ``fetch_row`` inside a real crawl, source trees alternating.

Run: .venv/bin/python bench/write_steps.py --runs 3 --port 18123 old=DIR new=DIR

Each run is one ``crawler crawl`` of the bench web (bench/sitegen.py, 120 hosts x 50 pages, seed 7,
served by nginx) as compare.py runs it, with the crawler started through this script's ``--child``
mode: it wraps ``write_part``, ``write_parquet`` (per output) and the fetcher's ``fetch_row`` with
``time.thread_time`` and ``getrusage(RUSAGE_THREAD)`` (system time, minor faults) and writes the totals
as JSON when the crawl exits. Unlike bench_write.py, which writes the same rows again and again into
warm memory, this sees what a crawl's parts cost: each part's Arrow buffers are fresh memory, faulted
in anew. Medians over the runs, in seconds per crawl.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _child(out: str, argv: list[str]) -> None:
    """Run ``crawler`` with its writer steps timed; the totals go to ``out`` at exit."""
    import atexit

    import crawler.fetcher.service as service
    import crawler.segments.writer as writer
    from crawler.cli import main

    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0])
    lock = threading.Lock()

    def timed(name: Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: Any, **kwargs: Any) -> Any:
            before, start = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu, after = time.thread_time() - start, resource.getrusage(resource.RUSAGE_THREAD)
                with lock:
                    entry = totals[name(*args)]
                    entry[0] += 1
                    entry[1] += cpu
                    entry[2] += after.ru_stime - before.ru_stime
                    entry[3] += after.ru_minflt - before.ru_minflt
        return inner

    writer.write_parquet = timed(lambda rows, schema, path, *a: f"parquet {path.parent.name}", writer.write_parquet)
    writer.write_part = timed(lambda *a: "write_part", writer.write_part)
    service.fetch_row = timed(lambda *a: "fetch_row", service.fetch_row)
    atexit.register(lambda: Path(out).write_text(json.dumps(dict(totals))))
    sys.argv = ["crawler", *argv]
    main()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--port", type=int, default=18080)
    ap.add_argument("trees", nargs="+", metavar="NAME=DIR", help="source trees to compare")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from crawlargs import crawl_args
    from nginx import Nginx
    from sitegen import generate

    work = Path(os.environ.get("BENCH_WORK", HERE / ".work")) / "write-steps"
    work.mkdir(parents=True, exist_ok=True)
    seeds = work / "seeds.txt"
    seeds.write_text("\n".join(generate(work / "web", 120, 50, args.port, 7)) + "\n")
    trees = dict(spec.split("=", 1) for spec in args.trees)
    results: dict[str, list[dict[str, list[float]]]] = {name: [] for name in trees}
    with Nginx(work / "web", args.port, work / "nginx"):
        for run in range(args.runs):
            for name, tree in trees.items():
                crawl_dir, out = work / f"crawl-{name}", work / f"{name}-{run}.json"
                shutil.rmtree(crawl_dir, ignore_errors=True)
                cmd = [sys.executable, __file__, "--child", str(out), *crawl_args(seeds, crawl_dir),
                       "-c", f"{tree}/config.yaml"]
                with open(work / f"{name}.log", "w") as log:
                    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": tree}, stdout=subprocess.DEVNULL,
                                            stderr=log)
                    _, status, usage = os.wait4(proc.pid, 0)
                if status != 0:
                    sys.exit(f"{name}: crawl failed, see {work / f'{name}.log'}")
                totals = json.loads(out.read_text())
                totals["process (all threads)"] = [1, usage.ru_utime + usage.ru_stime, usage.ru_stime, usage.ru_minflt]
                results[name].append(totals)
                print(f"{name} run {run}: load {os.getloadavg()[0]:.1f}, process CPU "
                      f"{totals['process (all threads)'][1]:.2f} s", flush=True)
    print(f"\n{'tree':8s} {'step':24s} {'calls':>7s} {'CPU s':>7s} {'sys s':>7s} {'faults':>8s}   (medians per crawl)")
    for name, runs in results.items():
        for step in sorted(set().union(*runs)):
            med = [statistics.median(r.get(step, [0, 0.0, 0.0, 0])[i] for r in runs) for i in range(4)]
            print(f"{name:8s} {step:24s} {med[0]:7.0f} {med[1]:7.3f} {med[2]:7.3f} {med[3]:8.0f}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3:])
    else:
        main()
