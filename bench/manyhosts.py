"""A latency-injected many-host web on loopback, and how close a crawl of it gets to the politeness bound.

One asyncio process (aiohttp) serves N loopback addresses (127.1.x.y), each its own host with a fixed
latency of 50-300 ms (``asyncio.sleep``, so 1,000 hosts cost little CPU), a few pages, and a robots.txt:
every tenth host asks ``Crawl-delay: 5``, the rest rely on ``fetcher.min_delay`` (4 s). The server logs
every request (start and end, monotonic and wall clock) as JSON lines that bench/observer.py reads.

The driver crawls it with ``crawler crawl`` (several rounds), then with ``crawler daemon`` (and Scrapy,
if it is installed), and for each prints the observer's verdict and the share of the politeness bound
reached: per host, its requests (robots.txt included) less one, times its delay, plus one latency; the
slowest host decides; bound / the span from the first request's start to the last response's end.

    python bench/manyhosts.py [--hosts 1000] [--only crawl,daemon,scrapy]

``Web`` is also the server of tests/e2e/test_politeness_observed.py: any site's answers (a status and a
Retry-After per path) can be set, on addresses and ports of the caller's choosing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import itertools
import json
import os
import random
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from observer import Origin, Request, observe, request_to_json, table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("BENCH_WORK", ROOT / "bench" / ".work")) / "manyhosts"
PEERS = ROOT / "bench" / "peers"


@dataclass
class Site:
    """One host: its files, and the paths it answers with another status (and a Retry-After)."""

    files: dict[str, str] = field(default_factory=dict)  # path -> body; robots.txt is one of them
    status: dict[str, int] = field(default_factory=dict)  # path -> status answered instead, empty body
    retry_after: dict[str, float] = field(default_factory=dict)  # path -> Retry-After sent with that status
    latency: float = 0.0  # seconds before every answer


class Web:
    """Serve sites on (address, port) pairs from one aiohttp application; log each request."""

    def __init__(self, sites: dict[tuple[str, int], Site], log: Path | None = None,
                 watch_lag: bool = False) -> None:
        self.sites = sites
        self.requests: list[Request] = []
        # The judge's own precision: a request is stamped when its handler runs, and while this one loop is
        # busy (a burst of hundreds of hosts at once) a request waits unstamped. With ``watch_lag`` a 1 ms
        # ticker records how late the loop ran: (when, how late), for every lag over 2 ms.
        self.lags: list[tuple[float, float]] = []
        self._watch_lag = watch_lag
        self._ticker: asyncio.Task[None] | None = None
        self.log_path = log
        self._log = None
        self._runner: web.AppRunner | None = None
        self._conns: dict[int, int] = {}
        self._serial = itertools.count(1)

    async def start(self) -> Web:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        bound: dict[tuple[str, int], Site] = {}
        for (address, port), site in self.sites.items():
            tcp = web.TCPSite(self._runner, address, port, backlog=1024)
            await tcp.start()
            bound[(address, tcp._server.sockets[0].getsockname()[1])] = site
        self.sites = bound  # port 0 became a real port
        if self.log_path is not None:
            self._log = open(self.log_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives with the server
        if self._watch_lag:
            self._ticker = asyncio.ensure_future(self._tick())
        return self

    async def _tick(self) -> None:
        while True:
            due = time.monotonic() + 0.001
            await asyncio.sleep(0.001)
            late = time.monotonic() - due
            if late > 0.002:
                self.lags.append((due, late))

    def max_lag(self, since: float = 0.0) -> float:
        return max((late for due, late in self.lags if due >= since), default=0.0)

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._log is not None:
            self._log.close()
            self._log = None

    async def __aenter__(self) -> Web:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def port_of(self, address: str) -> int:
        return next(port for (a, port) in self.sites if a == address)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        start, wall_start = time.monotonic(), time.time()
        address, port = request.transport.get_extra_info("sockname")[:2]
        site = self.sites.get((address, port), Site())
        conn = self._conns.setdefault(id(request.transport), next(self._serial))
        path = request.path
        status = site.status.get(path)
        retry_after = site.retry_after.get(path) if status else None
        if site.latency:
            await asyncio.sleep(site.latency)
        if status is not None:
            resp = web.Response(status=status, headers={"Retry-After": f"{retry_after:g}"} if retry_after else {})
        elif path in site.files:
            ctype = "text/plain" if path.endswith(".txt") else "text/html"
            resp = web.Response(text=site.files[path], content_type=ctype)
        else:
            resp = web.Response(status=404, text="not found")
        # Sent before the end is taken, so the log's end is the response's end as the client sees it.
        await resp.prepare(request)
        await resp.write_eof()
        host = request.headers.get("Host") or address
        host = host[: host.index("]") + 1] if host.startswith("[") else host.split(":", 1)[0]
        record = Request(start, time.monotonic(), "http", host, port, request.method, request.raw_path,
                         resp.status, retry_after, str(conn))
        self.requests.append(record)
        if self._log is not None:
            line = json.loads(request_to_json(record))
            line.update(wall_start=wall_start, wall_end=time.time())
            self._log.write(json.dumps(line) + "\n")
        return resp


# ---- the many-host web -------------------------------------------------------------------------

def address(i: int) -> str:
    return f"127.1.{i // 250}.{i % 250 + 1}"


def many_sites(hosts: int, pages: int, port: int, seed: int = 1) -> dict[tuple[str, int], Site]:
    """Each host: a robots.txt (every tenth with Crawl-delay: 5), a root linking its pages and a
    disallowed one, pages linking the next page and one page of another host."""
    rng = random.Random(seed)
    sites = {}
    for i in range(hosts):
        robots = "User-agent: *\nDisallow: /private/\n" + ("Crawl-delay: 5\n" if i % 10 == 0 else "")
        links = "".join(f'<a href="/p/{p}.html">page {p}</a> ' for p in range(pages))
        files = {"/robots.txt": robots,
                 "/": f"<html><head><title>host {i}</title></head><body>{links}"
                      '<a href="/private/x.html">private</a></body></html>'}
        for p in range(pages):
            other = address(rng.randrange(hosts))
            files[f"/p/{p}.html"] = (f"<html><head><title>host {i} page {p}</title></head><body>"
                                     f'<a href="/p/{(p + 1) % pages}.html">next</a> '
                                     f'<a href="http://{other}:{port}/p/{rng.randrange(pages)}.html">away</a>'
                                     "</body></html>")
        sites[(address(i), port)] = Site(files, latency=rng.uniform(0.05, 0.3))
    return sites


def free_port(addresses: list[str]) -> int:
    """A port free on the first address (and so, almost surely, on the others of 127.1/16)."""
    with socket.socket() as s:
        s.bind((addresses[0], 0))
        return s.getsockname()[1]


def bound_seconds(requests: list[Request], origins: dict[str, Origin], sites: dict[tuple[str, int], Site],
                  min_delay: float) -> float:
    """Per host: (its requests - 1) x its delay + one latency; the slowest host decides."""
    per_host: dict[tuple[str, int], int] = {}
    for r in requests:
        per_host[(r.host, r.port)] = per_host.get((r.host, r.port), 0) + 1
    worst = 0.0
    for key, n in per_host.items():
        spec = origins.get(f"http://{key[0]}:{key[1]}")
        delay = spec.delay if spec and spec.delay is not None else min_delay
        worst = max(worst, (n - 1) * delay + sites[key].latency)
    return worst


def _crawler_cmd() -> list[str]:
    bench_crawler = ROOT / ".venv-bench-crawler" / "bin" / "crawler"
    if bench_crawler.exists():
        return [str(bench_crawler)]
    return [sys.executable, "-m", "crawler"]


SETTINGS = ["-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=4", "-D",
            "fetcher.per_host_concurrency=1", "-D", "fetcher.concurrency=512", "-D", "log.level=warning",
            "-D", "log.format=json"]


async def _wait(proc: asyncio.subprocess.Process, what: str) -> None:
    code = await proc.wait()
    if code != 0:
        raise RuntimeError(f"{what} exited {code}; see its log under {WORK}")


async def run_crawl(seeds: Path, rounds: int) -> None:
    crawl_dir = WORK / "crawl-crawl"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    with open(WORK / "crawl.log", "w") as log:
        proc = await asyncio.create_subprocess_exec(
            *_crawler_cmd(), "crawl", "--seeds", str(seeds), "--rounds", str(rounds), "-D", f"crawl_dir={crawl_dir}",
            *SETTINGS, stdout=log, stderr=log, cwd=ROOT)
        await _wait(proc, "crawler crawl")


async def run_daemon(seeds: Path, server: Web, expected: int, timeout: float) -> None:
    """The daemon, until the server has answered every request a full crawl makes and then 3 s of quiet."""
    crawl_dir = WORK / "crawl-daemon"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    (crawl_dir / "seeds").mkdir(parents=True)
    shutil.copy(seeds, crawl_dir / "seeds" / "seeds.txt")
    before = len(server.requests)
    with open(WORK / "daemon.log", "w") as log:
        proc = await asyncio.create_subprocess_exec(
            *_crawler_cmd(), "daemon", "-D", f"crawl_dir={crawl_dir}", "-D", f"daemon.seeds={crawl_dir / 'seeds'}",
            "-D", "daemon.idle_sleep=1", "-D", "metrics.listen=127.0.0.1:0", *SETTINGS,
            stdout=log, stderr=log, cwd=ROOT)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and proc.returncode is None:
                seen = len(server.requests) - before
                quiet = time.monotonic() - (server.requests[-1].end if seen else 0)
                if seen >= expected and quiet > 3:
                    break
                await asyncio.sleep(0.5)
        finally:
            if proc.returncode is None:
                os.kill(proc.pid, signal.SIGTERM)  # not send_signal: see tests/procs.py (CPython gh-87744)
            await proc.wait()


async def run_scrapy(seeds: Path, concurrency: int) -> None:
    out = WORK / "scrapy.jsonl"
    out.unlink(missing_ok=True)
    with open(WORK / "scrapy.log", "w") as log:
        # Scrapy has no Crawl-delay: its DOWNLOAD_DELAY is the min delay, one request per domain at a time.
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(PEERS / "scrapy_spider.py"), str(seeds), str(out), str(concurrency), "4", "1",
            stdout=log, stderr=log, cwd=ROOT)
        await _wait(proc, "scrapy")


async def main_async(args: argparse.Namespace) -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    addresses = [address(i) for i in range(args.hosts)]
    port = args.port or free_port(addresses)
    sites = many_sites(args.hosts, args.pages, port)
    seeds = WORK / "seeds.txt"
    seeds.write_text("".join(f"http://{a}:{port}/\n" for a in addresses))
    origins = {}
    for (a, p), site in sites.items():
        delay = 5.0 if "Crawl-delay: 5" in site.files["/robots.txt"] else 4.0
        origins[f"http://{a}:{p}"] = Origin(robots=site.files["/robots.txt"], delay=delay, in_flight=1)
    # What each origin served, for re-judging the log by hand: python bench/observer.py LOG --format jsonl --spec ...
    (WORK / "spec.json").write_text(json.dumps({o: {"robots": s.robots, "delay": s.delay, "in_flight": 1}
                                                for o, s in origins.items()}))
    # robots.txt, the root and its pages: what a polite complete crawl asks of each host
    expected = args.hosts * (2 + args.pages)
    log_path = WORK / "requests.jsonl"
    log_path.unlink(missing_ok=True)
    reports, lines, lags = [], [], []
    async with Web(sites, log_path, watch_lag=True) as server:
        for name in args.only.split(","):
            if name == "scrapy" and importlib.util.find_spec("scrapy") is None:
                print("scrapy: not installed here (make bench-compare builds .venv-bench with it); skipped")
                continue
            mark = len(server.requests)
            started = time.monotonic()
            if name == "crawl":
                await run_crawl(seeds, args.rounds)
            elif name == "daemon":
                await run_daemon(seeds, server, expected, args.timeout)
            elif name == "scrapy":
                await run_scrapy(seeds, args.concurrency)
            else:
                raise SystemExit(f"--only: unknown contender {name!r}")
            wall = time.monotonic() - started
            reqs = server.requests[mark:]
            agent = "crawler" if name != "scrapy" else "scrapy"
            total, _ = observe(reqs, origins, agent=agent, min_delay=4.0, in_flight=1, name=name)
            reports.append(total)
            # Judged again allowing for the server's own measured stamping lag during this run.
            lag = server.max_lag(started)
            lenient, _ = observe(reqs, origins, agent=agent, min_delay=4.0, in_flight=1, name=name,
                                 tolerance=lag + 0.002)
            lags.append(f"{name}: the server's loop ran up to {1000 * lag:.0f} ms late; gaps below the delay by "
                        f"more than that: {lenient.gaps_below_delay} (by more than 2 ms: {total.gaps_below_delay})")
            span = (total.last_end - total.first_start) if reqs else float("nan")
            bound = bound_seconds(reqs, origins, server.sites, 4.0)
            lines.append(f"| {name} | {len(reqs)} / {expected} | {span:.1f} | {bound:.1f} | "
                         f"{100 * bound / span:.1f}% | {total.violations} | {wall:.1f} |")
            print(f"{name}: {len(reqs)} requests, span {span:.1f}s, bound {bound:.1f}s", flush=True)
    print(f"\n{args.hosts} hosts, {args.pages} pages each, latency 50-300 ms, min delay 4 s, Crawl-delay 5 on 1 in 10")
    print("\n| contender | requests / complete crawl | span s | politeness bound s | of the bound | violations | wall s |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    print()
    print("\n".join(lags))
    print()
    print(table(reports))
    for report in reports:
        for example in report.examples[:5]:
            print(f"  {report.name}: {example}")
    return 1 if any(r.violations for r in reports) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--timeout", type=float, default=300, help="longest the daemon runs")
    parser.add_argument("--only", default="crawl,daemon,scrapy")
    args = parser.parse_args()
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
