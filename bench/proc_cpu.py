"""CPU seconds of each process of a crawler-all `crawl` (fetch, parse, writer), source trees alternating.

compare.py times a contender as a whole; this splits it by process, to see what the fetch process
itself pays. It polls /proc/PID/stat of the crawl and its descendants every 50 ms and keeps each
one's last utime+stime. Runs on the web and seeds compare.py generated in BENCH_WORK (run that first).

    BENCH_WORK=/tmp/bw .venv/bin/python bench/proc_cpu.py --runs 4 --port 18491 old=DIR1 new=DIR2
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from crawlargs import crawl_args  # noqa: E402
from nginx import Nginx  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("BENCH_WORK", ROOT / "bench" / ".work"))
TICK = os.sysconf("SC_CLK_TCK")
CRAWLER = ROOT / ".venv-bench-crawler" / "bin" / "crawler"  # as in compare.py: a user's install


def _processes() -> dict[int, tuple[int, float, int]]:
    """pid -> (parent pid, CPU seconds, start time in ticks)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        found[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, int(fields[19]))
    return found


def run(cmd: list[str], env: dict[str, str]) -> list[float]:
    """CPU seconds of the command's process, then of its descendants in the order they started."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: dict[int, tuple[float, int]] = {}
    while proc.poll() is None:
        procs = _processes()
        family = {proc.pid}
        for pid, (parent, cpu, start) in sorted(procs.items(), key=lambda kv: kv[1][2]):
            if pid in family or parent in family:
                family.add(pid)
                seen[pid] = (cpu, start)
        time.sleep(0.05)
    main = seen.pop(proc.pid, (0.0, 0))[0]
    return [main] + [cpu for cpu, _ in sorted(seen.values(), key=lambda v: v[1]) if cpu >= 0.05]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--parse-processes", type=int, default=1)
    parser.add_argument("trees", nargs="+", metavar="NAME=DIR")
    args = parser.parse_args()
    trees = dict(spec.partition("=")[::2] for spec in args.trees)
    results: dict[str, list[list[float]]] = {name: [] for name in trees}
    with Nginx(WORK / "web", args.port, WORK / "nginx"):
        for i in range(args.runs):
            names = list(trees) if i % 2 == 0 else list(trees)[::-1]
            for name in names:
                crawl = WORK / f"proc-cpu-{name}"
                shutil.rmtree(crawl, ignore_errors=True)
                cmd = [str(CRAWLER), *crawl_args(WORK / "seeds.txt", crawl), "-c", f"{trees[name]}/config.yaml",
                       "-D", f"fetcher.parse_processes={args.parse_processes}"]
                cpus = run(cmd, {**os.environ, "PYTHONPATH": trees[name]})
                results[name].append(cpus)
                print(f"run {i} {name:8s} fetch {cpus[0]:6.2f}  children "
                      + " ".join(f"{c:6.2f}" for c in cpus[1:]) + f"  all {sum(cpus):6.2f}", flush=True)
    for name, runs in results.items():
        print(f"{name}: median fetch process {statistics.median(r[0] for r in runs):.2f} s, "
              f"all processes {statistics.median(sum(r) for r in runs):.2f} s")


if __name__ == "__main__":
    main()
