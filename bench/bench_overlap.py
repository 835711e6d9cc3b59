"""Daemon overlap: pages/s over time with and without ``daemon.overlap`` (the idle tail of each round).

Run: .venv-bench/bin/python bench/bench_overlap.py [--hosts 48] [--pages 20] [--slow 4] [--delay 0.5]

The web is bench/sitegen.py's, served by nginx on loopback; ``--slow`` of its
hosts get a robots.txt ``Crawl-delay`` (``--delay`` seconds), so they finish
each round late while the other hosts are done in a few seconds: the idle
tail. ``generate.max_per_host`` caps each host's share of a segment, so a host
takes several rounds and there is always work due outside the slow hosts (the
overlap can only start a segment of URLs that are due and not held by the
running fetch). The same web is then crawled twice by ``crawler daemon`` from
the same seeds, with ``daemon.overlap`` true and false; each run is stopped
(SIGTERM) once the daemon logs ``daemon.idle`` with "nothing due": the web is
crawled. The per-second histogram comes from ``fetch_time`` of every row the
fetcher wrote. The default size crawls everything in well under two minutes per
run on 2 cores; ``--timeout`` only guards against a hang.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nginx import Nginx  # noqa: E402
from sitegen import generate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work"
CRAWLER = ROOT / ".venv" / "bin" / "crawler"


def slow_down(web: Path, hosts: list[str], delay: float) -> None:
    """Give these hosts a robots.txt Crawl-delay (the plain file and nginx's pre-gzipped copy)."""
    import gzip

    text = f"User-agent: *\nCrawl-delay: {delay:g}\nDisallow: /private/\n".encode()
    for host in hosts:
        (web / host / "robots.txt").write_bytes(text)
        (web / host / "robots.txt.gz").write_bytes(gzip.compress(text, 6))


def run_daemon(name: str, overlap: bool, seeds: Path, args: argparse.Namespace, slow: set[str]) -> dict:
    crawl = WORK / f"overlap-{name}"
    shutil.rmtree(crawl, ignore_errors=True)
    crawl.mkdir(parents=True)
    log_path = crawl / "daemon.log"
    cmd = [str(CRAWLER), "daemon",
           "-D", f"crawl_dir={crawl}",
           "-D", f"daemon.overlap={'true' if overlap else 'false'}",
           "-D", f"daemon.max_cycles={args.max_cycles}",
           "-D", "daemon.idle_sleep=1s",
           "-D", "metrics.listen=",
           "-D", "http.allow_private_networks=true",
           "-D", "fetcher.min_delay=0",
           "-D", f"fetcher.concurrency={args.concurrency}",
           "-D", "fetcher.per_host_concurrency=2",
           "-D", f"generate.max_per_host={args.max_per_host}",
           "-D", f"daemon.seeds={seeds}",
           "-D", "log.format=json"]
    started = time.time()
    finished = None
    reason = "timeout"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    finished, reason = time.time(), f"exited {proc.returncode}"
                    break
                if any(_idle(line) for line in log_path.read_text(errors="replace").splitlines()):
                    finished, reason = time.time(), "nothing due"
                    break
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    times, statuses, urls, fast_last, segment_hosts = [], Counter(), set(), 0.0, set()
    for part in sorted(crawl.glob("segments/*/fetcher/*.parquet")):
        table = pq.read_table(part, columns=["fetch_time", "status", "url", "host"])
        segment_hosts.update((part.parent.parent.name, h) for h in table.column("host").to_pylist())
        statuses.update(table.column("status").to_pylist())
        urls.update(table.column("url").to_pylist())
        for t, host in zip(table.column("fetch_time").to_pylist(), table.column("host").to_pylist(), strict=True):
            if t is None:
                continue
            # fetch_time is stored as naive UTC
            stamp = t.replace(tzinfo=UTC).timestamp() if t.tzinfo is None else t.timestamp()
            times.append(stamp)
            if host not in slow:
                fast_last = max(fast_last, stamp - started)
    hist = Counter(int(t - started) for t in times)
    lines = log_path.read_text(errors="replace").splitlines()
    cycles = sum(1 for line in lines if '"cycle.done"' in line)
    overlaps = sum(1 for line in lines if '"daemon.overlap"' in line)
    robots = sum(1 for line in lines if '"robots.outcome"' in line)  # one per robots.txt fetched (and its hops)
    held = sum(1 for line in lines if '"fetch.held_elsewhere"' in line)
    return {"name": name, "hist": hist, "pages": len(times), "started": started, "reason": reason,
            "wall": (finished or time.time()) - started,
            "first": min(times) - started if times else 0.0, "last": max(times) - started if times else 0.0,
            "cycles": cycles, "overlaps": overlaps, "statuses": dict(statuses), "urls": len(urls),
            "robots": robots, "held": held, "robots_per_segment": len(segment_hosts),
            "fast_done": fast_last, "fast_pages": sum(1 for t in times if t - started <= fast_last)}


def _idle(line: str) -> bool:
    if '"daemon.idle"' not in line:
        return False
    try:
        return "nothing due" in json.loads(line).get("reason", "")
    except ValueError:
        return False


def summarize(run: dict) -> dict:
    hist = run["hist"]
    span = range(int(run["first"]), int(run["last"]) + 1)
    peak = max(hist.values(), default=0)
    low = sum(1 for s in span if hist.get(s, 0) < 0.25 * peak)
    idle = sum(1 for s in span if not hist.get(s, 0))
    return {"urls": run["urls"], "fast_done": run["fast_done"],
            "fast_rate": run["fast_pages"] / run["fast_done"] if run["fast_done"] else 0.0,
            "wall": run["wall"], "pages": run["pages"], "fetch_span": run["last"] - run["first"],
            "rate": run["pages"] / run["wall"] if run["wall"] else 0.0, "peak": peak,
            "low_share": low / len(span) if span else 0.0, "idle_share": idle / len(span) if span else 0.0,
            "cycles": run["cycles"], "overlaps": run["overlaps"], "repeats": run["pages"] - run["urls"],
            "robots": run["robots"], "held": run["held"], "robots_per_segment": run["robots_per_segment"]}


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, total) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for run in runs:
        hist = run["hist"]
        xs = list(range(int(run["wall"]) + 1))
        ys = [hist.get(x, 0) for x in xs]
        label = f"daemon.overlap={run['name']}"
        ax.plot(xs, ys, label=label)
        done = 0
        total.plot(xs, [done := done + y for y in ys], label=label)
    ax.set_ylabel("pages/s")
    ax.set_title("crawler daemon, same web until nothing is due: with and without overlap")
    ax.legend()
    total.set_xlabel("seconds since the daemon started")
    total.set_ylabel("pages fetched so far")
    total.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=48)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--slow", type=int, default=4, help="hosts given a robots.txt Crawl-delay")
    parser.add_argument("--delay", type=float, default=0.5, help="their Crawl-delay, seconds")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--max-per-host", type=int, default=12, help="generate.max_per_host")
    parser.add_argument("--max-cycles", type=int, default=0, help="daemon.max_cycles; 0 = until nothing is due")
    parser.add_argument("--timeout", type=float, default=180, help="per run, seconds: a guard against a hang")
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "bench-overlap.png")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    web = WORK / "overlap-web"
    urls = generate(web, args.hosts, args.pages, args.port, args.seed)
    hosts = sorted(p.name for p in web.iterdir() if p.is_dir())
    slow_down(web, hosts[: args.slow], args.delay)
    seeds = WORK / "overlap-seeds"
    shutil.rmtree(seeds, ignore_errors=True)
    seeds.mkdir()
    (seeds / "seeds.txt").write_text("\n".join(urls) + "\n")
    runs = []
    with Nginx(web, args.port, WORK / "overlap-nginx"):
        for name, overlap in (("on", True), ("off", False)):
            run = run_daemon(name, overlap, seeds, args, set(hosts[: args.slow]))
            s = summarize(run)
            print(f"overlap {name:3s}: {s['pages']} pages ({s['urls']} URLs) in {s['wall']:.1f}s ({run['reason']}), "
                  f"fast hosts done at {s['fast_done']:.1f}s ({s['fast_rate']:.1f} pages/s until then), "
                  f"{s['rate']:.1f} pages/s, peak {s['peak']}/s, {s['low_share']:.0%} of seconds below 25% of peak, "
                  f"{s['idle_share']:.0%} without a page, load {os.getloadavg()[0]:.2f}, "
                  f"{s['cycles']} cycles, {s['overlaps']} overlapped starts, {s['repeats']} repeated fetches, "
                  f"{s['robots']} robots.txt fetches ({s['robots_per_segment']} with a cache per segment), "
                  f"{s['held']} entries left to the segment that held them, "
                  f"by status {run['statuses']}", flush=True)
            runs.append(run)
    plot(runs, args.plot)
    print(f"\nweb: {args.hosts} hosts x {args.pages} pages, {args.slow} hosts with Crawl-delay {args.delay:g}s; "
          f"fetcher.concurrency={args.concurrency}, per_host_concurrency=2, generate.max_per_host={args.max_per_host}; "
          f"{os.cpu_count()} CPUs\n")
    print("| daemon.overlap | pages (distinct URLs) | s to nothing due | pages/s | s until the fast hosts are done "
          "| pages/s until then | peak pages/s | seconds < 25% of peak | seconds without a page | cycles "
          "| overlapped starts | repeated fetches | robots.txt fetches (with a cache per segment) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        s = summarize(run)
        print(f"| {run['name']} | {s['pages']} ({s['urls']}) | {s['wall']:.1f} ({run['reason']}) | {s['rate']:.1f} | "
              f"{s['fast_done']:.1f} | {s['fast_rate']:.1f} | {s['peak']} | "
              f"{s['low_share']:.0%} | {s['idle_share']:.0%} | {s['cycles']} | {s['overlaps']} | "
              f"{s['repeats']} | {s['robots']} ({s['robots_per_segment']}) |")
    print(f"\nplot: {args.plot.relative_to(ROOT) if args.plot.is_relative_to(ROOT) else args.plot}")


if __name__ == "__main__":
    main()
