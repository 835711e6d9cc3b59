"""Where one `crawl` of the bench web spends its wall clock, phase by phase, against the floor's whole run.

    .venv-bench/bin/python bench/timeline.py [--runs 3] [--port 18080]

Runs on the web, seeds and URL list compare.py generated in BENCH_WORK (run that first): the bench
crawl (crawlargs.py, at log level info) and the floor (peers/floor.py) alternating, each a fresh
process. The crawl's phases come from its own log: start-up (process start to inject.done), each
round's generate, fetch (fetch.start to fetch.done), updatedb and invertlinks, and the exit. The last
line is the bound the fetch phases alone set: the crawler's pages/s could reach at most
floor wall / fetch-phase wall of the floor's even if start-up, jobs and exit cost nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import CRAWLER, WORK, run_floor  # noqa: E402
from crawlargs import crawl_args, log_time  # noqa: E402
from nginx import Nginx  # noqa: E402

PHASE_END = {"generate.done": "generate", "fetch.done": "fetch", "updatedb.done": "updatedb",
             "invertlinks.done": "invertlinks", "inject.done": "start-up + inject"}


def crawl_phases(tag: str) -> tuple[dict[str, float], float, int]:
    """Seconds per phase (summed over rounds), the wall clock, and the requests the fetches made."""
    crawl_dir = WORK / f"timeline-{tag}"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    log = WORK / f"timeline-{tag}.log"
    cmd = [str(CRAWLER), *crawl_args(WORK / "seeds.txt", crawl_dir), "-D", "log.level=info"]
    started = time.time()
    with open(log, "w") as err:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, check=True)
    wall = time.time() - started
    phases: dict[str, float] = {}
    last, requests = started, 0
    for line in log.read_text().splitlines():
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        name = PHASE_END.get(event["event"])
        if event["event"] == "fetch.start":  # generate's end to the fetch's start: loading the known URLs
            phases["fetch set-up"] = phases.get("fetch set-up", 0.0) + log_time(event) - last
            last = log_time(event)
        elif name is not None:
            phases[name] = phases.get(name, 0.0) + log_time(event) - last
            last = log_time(event)
            requests += event.get("fetched", 0) if name == "fetch" else 0
    phases["rest (round ends, exit)"] = started + wall - last
    return phases, wall, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=18080)
    args = parser.parse_args()
    crawls, floors = [], []
    with Nginx(WORK / "web", args.port, WORK / "nginx"):
        for i in range(args.runs):
            if i % 2:
                floors.append(run_floor(WORK / "urls.txt", 256, f"timeline-{i}").wall)
            crawls.append(crawl_phases(str(i)))
            if not i % 2:
                floors.append(run_floor(WORK / "urls.txt", 256, f"timeline-{i}").wall)
    names = list(crawls[0][0])
    print(f"{'phase':26s} {'median s':>9s}   runs")
    for name in names:
        values = [c[0].get(name, 0.0) for c in crawls]
        print(f"{name:26s} {statistics.median(values):9.2f}   {' '.join(f'{v:.2f}' for v in values)}")
    wall = statistics.median(c[1] for c in crawls)
    fetch = statistics.median(c[0]["fetch"] for c in crawls)
    floor = statistics.median(floors)
    print(f"{'crawl wall':26s} {wall:9.2f}   {' '.join(f'{c[1]:.2f}' for c in crawls)}")
    print(f"{'floor wall':26s} {floor:9.2f}   {' '.join(f'{f:.2f}' for f in floors)}")
    print(f"requests fetched by the crawl: {crawls[0][2]}")
    print(f"crawler/floor pages/s now: {floor / wall:.2f}; "
          f"bound with start-up, jobs and exit at zero: {floor / fetch:.2f}")


if __name__ == "__main__":
    main()
