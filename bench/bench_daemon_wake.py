"""Daemon wake-ups: generate runs over a short daemon run, and how soon a seed dropped into an idle daemon is fetched.

Run: PYTHONPATH=$PWD .venv/bin/python bench/bench_daemon_wake.py [--hosts 8] [--idle 5] [-D key=value ...]

examples/site is served by crawler.devserver on ``--hosts`` loopback addresses
(127.0.0.1, .2, ...), each with its own latency so that hosts finish a segment
at different times (the tail of each fetch). ``crawler daemon`` crawls them from
one seed file with the default ``daemon.idle_sleep``; ``--idle`` seconds after
it first logs ``daemon.idle`` a seed file for one more host is dropped into its
seeds folder, and the time until that host sees its first request is printed.
Once the daemon is idle again it is stopped (SIGTERM). Printed: the generate
runs (``generate.done``: a segment; ``generate.empty``: nothing found), the
daemon's CPU seconds, and the drop-to-request latency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from crawler.devserver import SiteServer

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "examples" / "site"


async def wait_for(lines: list[dict], predicate, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        for line in lines[seen:]:
            if predicate(line):
                return line
        seen = len(lines)
        await asyncio.sleep(0.05)
    raise TimeoutError("the daemon did not log what was awaited")


async def run(args: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-wake-"))
    servers = [SiteServer(SITE, f"127.0.0.{i + 1}", 0, delay=0.01 + 0.03 * i) for i in range(args.hosts + 1)]
    for server in servers:
        await server.start()
    *crawled, late = servers
    seeds = work / "seeds"
    seeds.mkdir()
    (seeds / "first.txt").write_text("".join(s.url("/") + "\n" for s in crawled))
    cmd = [sys.executable, "-m", "crawler", "daemon", "-D", f"crawl_dir={work / 'crawl'}",
           "-D", f"daemon.seeds={seeds}", "-D", "metrics.listen=", "-D", "http.allow_private_networks=true",
           "-D", "fetcher.min_delay=0", "-D", "fetcher.concurrency=8", "-D", "fetcher.per_host_concurrency=2",
           "-D", "log.format=json", "-D", "log.level=debug"]
    for override in args.define:
        cmd += ["-D", override]
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=work, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
                                                limit=1 << 22)
    lines: list[dict] = []

    async def read() -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            with contextlib.suppress(ValueError):  # not a JSON log line
                lines.append({**json.loads(raw), "_t": time.monotonic()})

    reader = asyncio.create_task(read())
    started = time.monotonic()
    try:
        idle = await wait_for(lines, lambda e: e.get("event") == "daemon.idle", args.timeout)
        crawled_s = idle["_t"] - started
        await asyncio.sleep(args.idle)
        temp = seeds / ".late.txt"
        temp.write_text(late.url("/") + "\n")
        dropped = time.monotonic()
        temp.rename(seeds / "late.txt")
        while not late.requests and time.monotonic() - dropped < args.timeout:
            await asyncio.sleep(0.01)
        seen = time.monotonic()
        latency = seen - dropped if late.requests else None
        await wait_for(lines, lambda e: e.get("event") == "daemon.idle" and e["_t"] > seen, args.timeout)
        os.kill(proc.pid, signal.SIGTERM)
        await proc.wait()
        await reader
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for server in servers:
            await server.stop()
        shutil.rmtree(work, ignore_errors=True)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    events = Counter(e.get("event") for e in lines)
    return {
        "hosts": args.hosts,
        "first_crawl_s": round(crawled_s, 2),
        "run_s": round(time.monotonic() - started, 2),
        "cycles": events["cycle.done"],
        "generate_runs": events["generate.done"] + events["generate.empty"],
        "generate_empty": events["generate.empty"],
        "empty_while_fetching": events["daemon.overlap_skipped"],
        "wake_reasons": dict(Counter(",".join(e["reasons"]) for e in lines if e.get("event") == "daemon.wake")),
        "skipped": dict(sum((Counter(e["skipped"]) for e in lines if e.get("event") == "daemon.wake"), Counter())),
        "daemon_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "seed_to_first_request_s": round(latency, 3) if latency is not None else None,
        "pages_fetched": sum(len(s.requests) for s in servers),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--idle", type=float, default=5.0, help="seconds idle before the late seed file is dropped")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("-D", dest="define", action="append", default=[], help="config override for the daemon")
    print(json.dumps(asyncio.run(run(parser.parse_args()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
