"""Crawler vs Scrapy vs the floor on a web whose pages are real ones (issue 19).

compare.py's generated pages are all alike (paragraphs of words, one style, one script): cheap to
parse and small to store, so they flatter whoever parses and writes the most. This web mixes real
HTML written by others with compare.py's generated hosts, served by one nginx:

- real: the Debian documentation trees of bench/realsites.py (its SITES and prepare(): downloaded
  once, unpacked under bench/.work/realsites/trees/), each hard-linked into
  bench/.work/realweb/mirrors/PACKAGE with every .html beside a gzip -6 copy (nginx's gzip_static,
  as for the generated pages) and the robots.txt of realsites.py (one real folder disallowed); each
  tree served on --copies loopback addresses (127.0.20.T, 127.0.21.T, ...: T the tree's place in
  SITES), so the web has many hosts, as a broad crawl does;
- synthetic: compare.py's generator (bench/sitegen.py: ~30 kB pages, 10-80 links, a disallowed
  folder, /moved/ redirects, links to missing pages) on --hosts addresses 127.0.1.N, plus what a
  crawl meets on the real web: two small hosts with `Crawl-delay: 1` (127.0.2.1-2, 5 pages each),
  on one host in ten two pages
  served at 8 kB/s (about 2 s each) and a page answering 500, on one host in 25 a spider trap
  (/trap/: every path below it is the same page, linking one folder deeper, endlessly).

Contenders, each its own process timed from outside (wall; user+sys CPU of it and every child it
waited for, wait4; peak RSS of its largest process, wait4; and the peak of the RSS summed over all
its processes, sampled from /proc every 100 ms, bench/proctree.py):
- crawler / crawler-all / crawler-one: `crawler crawl --rounds 10` with the shipped defaults but the
  loopback bench's settings (bench/crawlargs.py: private networks allowed, no delay, concurrency 256,
  2 per host) and db.ignore_external_links (the trees link to the real web); crawler-all names
  fetcher.parse_processes and crawler-one sets it to 0, as compare.py does. Run from
  .venv-bench-crawler with PYTHONPATH=--source;
- scrapy: bench/peers/scrapy_spider.py (robots, 2 per host, no delay, uvloop), allowed_domains =
  the web's addresses;
- floor: bench/peers/floor.py over every URL the crawler requested, hosts interleaved.
nginx's access log is judged by bench/observer.py for each run (robots, in flight, Crawl-delay,
spider trap requests) and checked for requests naming a host the web does not serve.

    make bench-realweb    (= .venv-bench/bin/python bench/realweb.py)
    .venv-bench/bin/python bench/realweb.py --small --only crawler    (a quick check, ~20 s)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from itertools import zip_longest
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import _SHIM, CRAWLER, CRAWLER_VARIANTS, PEERS, ROOT, Run, _histogram, _variant, median_row, plot  # noqa: E402
from compare import WORK as BENCH_WORK  # noqa: E402
from crawlargs import crawl_settings, crawler_env  # noqa: E402
from nginx import Nginx  # noqa: E402
from observer import Origin, Report, combine, observe, read_nginx, table  # noqa: E402
from proctree import TreeSampler  # noqa: E402
from realsites import SITES, Site, prepare  # noqa: E402
from sitegen import _write, generate, host_name  # noqa: E402

WORK = BENCH_WORK / "realweb"
TRAP = "/trap/"

# Inside compare.py's one server block (root = the web's folder named by the Host header).
LOCATIONS = f"""    location /slow/ {{ gzip_static off; limit_rate 8k; }}
    location {TRAP} {{ try_files {TRAP}index.html =404; }}
    location /error/ {{ return 500; }}"""


def tree_address(site: Site, copy: int) -> str:
    """Copy ``copy`` of a tree: 127.0.(20 + copy).(its place in SITES + 1)."""
    return f"127.0.{20 + copy}.{SITES.index(site) + 1}"


def _put(path: Path, data: bytes) -> None:
    """Write under a temp name and rename: the mirrors are hard links to the trees, and writing into a
    linked file would change the original."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


def mirror(site: Site, root: Path) -> Path:
    """The tree's HTML root hard-linked under WORK/mirrors, each .html beside its .gz, our robots.txt."""
    out = WORK / "mirrors" / site.package
    robots = f"User-agent: *\nDisallow: {site.disallow}\n"
    stamp = out / ".mirrored"
    if stamp.exists() and stamp.read_text() == robots:
        return out
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(root, out, symlinks=True, copy_function=_link)
    for page in out.rglob("*.html"):
        if page.is_file() and not page.is_symlink():
            _put(page.with_name(page.name + ".gz"), gzip.compress(page.read_bytes(), 6))
    _put(out / "robots.txt", robots.encode())
    _put(out / "robots.txt.gz", gzip.compress(robots.encode(), 6))
    stamp.write_text(robots)
    return out


def _slow_page(host: str, i: int) -> str:
    text = " ".join(f"Reading {n} of the slow archive of {host}." for n in range(400))
    return f"<!DOCTYPE html><html><head><title>{host} slow {i}</title></head><body><p>{text}</p></body></html>\n"


# Two small hosts of their own with `Crawl-delay: 1` (a generated host of 50 pages, its redirects and
# 404s would take 100 s at that delay and be the whole crawl's tail).
DELAYED = ["127.0.2.1", "127.0.2.2"]
DELAYED_PAGES = 4

TRAP_PAGE = ("<!DOCTYPE html><html><head><title>Events calendar</title></head><body><h1>Events</h1>"
             "<p>No events this month.</p><a href=\"next/\">next month</a> <a href=\"/\">home</a></body></html>\n")


def synthetic(web: Path, hosts: int, pages: int, port: int, seed: int) -> list[str]:
    """compare.py's generated hosts (sitegen.generate, which empties ``web``) and their extras."""
    seeds = generate(web, hosts, pages, port, seed)
    for host in DELAYED:
        _write(web / host / "robots.txt", "User-agent: *\nCrawl-delay: 1\n")
        for n in range(DELAYED_PAGES):
            others = "".join(f'<li><a href="/p/{m}.html">part {m}</a></li>' for m in range(DELAYED_PAGES) if m != n)
            _write(web / host / "p" / f"{n}.html", f"<!DOCTYPE html><html><head><title>{host} part {n}</title></head>"
                   f"<body><h1>Part {n}</h1><p>{_slow_page(host, n)[:2000]}</p><ul>{others}</ul></body></html>\n")
        _write(web / host / "index.html", f"<!DOCTYPE html><html><head><title>{host}</title></head><body>"
               f'<a href="/p/0.html">start</a></body></html>\n')
        seeds.append(f"http://{host}:{port}/")
    for i in range(hosts):
        host = host_name(i)
        root, extra = web / host, []
        if i % 10 == 5:
            for n in range(2):
                _write(root / "slow" / f"{n}.html", _slow_page(host, n))
                extra.append(f"/slow/{n}.html")
            extra.append("/error/0.html")
        if i % 25 == 3:
            _write(root / TRAP.strip("/") / "index.html", TRAP_PAGE)
            extra.append(TRAP)
        if extra:
            index = root / "index.html"
            links = "".join(f'<li><a href="{u}">{u}</a></li>' for u in extra)
            _write(index, index.read_text().replace("</ul>", links + "</ul>"))
    return seeds


def build(args: argparse.Namespace) -> tuple[Path, list[str], dict[str, str]]:
    """The web's folder, its seed URLs and what each host is (the tree's name, or "synthetic")."""
    web = WORK / "web"
    seeds = synthetic(web, args.hosts, args.pages, args.port, args.seed)
    kinds = {host: "synthetic" for host in [*map(host_name, range(args.hosts)), *DELAYED]}
    for site in (s for s in SITES if s.name in args.trees):
        tree = mirror(site, prepare(site))
        for copy in range(args.copies):
            addr = tree_address(site, copy)
            (web / addr).symlink_to(tree, target_is_directory=True)
            seeds.append(f"http://{addr}:{args.port}/")
            kinds[addr] = site.name
    return web, seeds, kinds


@dataclass
class WebRun(Run):
    tree_rss_mb: float = 0.0  # peak of the RSS summed over all the contender's processes
    processes: int = 0  # the most of its processes alive at once
    rounds: int | None = None  # crawler: segments generated
    external_queued: int | None = None  # crawler: webdb URLs on a host the web does not serve
    log_errors: int | None = None  # crawler: lines logged at level error


def timed(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    """compare.py's launcher (wait4: CPU of every child waited for, the largest process's RSS) plus the
    summed RSS of the launcher's descendants (the launcher itself left out)."""
    figures = log.with_suffix(".usage.json")
    with open(log, "w") as out:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", _SHIM, str(figures), *cmd], stdout=out,
                                stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **env} if env else None)
        with TreeSampler(proc.pid) as sampler:
            status = proc.wait()
        wall = time.monotonic() - start
    if status != 0:
        raise RuntimeError(f"{cmd[0]} failed (exit {status}); see {log}")
    usage = json.loads(figures.read_text())
    for pid, name, mb in sorted(sampler.peak_parts, key=lambda part: -part[2]):
        print(f"  at the summed peak: {mb:6.0f} MB  pid {pid}  {name}", flush=True)
    return {"wall": wall, "cpu": usage["cpu"], "rss_mb": usage["rss_kb"] / 1024,
            "tree_rss_mb": sampler.peak_mb, "processes": sampler.peak_processes}


# --tree NAME=DIR as in compare.py: contender NAME is the crawler from source tree DIR.
TREES: dict[str, str] = {}


def run_crawler(seeds: Path, name: str, tag: str, args: argparse.Namespace,
                served: set[str]) -> tuple[WebRun, list[str]]:
    crawl = WORK / f"crawl-{name}-{tag}"
    shutil.rmtree(crawl, ignore_errors=True)
    tree = Path(TREES.get(name, args.source)).resolve()
    config = ["-c", str(tree / "config.yaml"), "-D", f"crawl_dir={crawl}"]
    cmd = [str(CRAWLER), "crawl", "--seeds", str(seeds), "--rounds", str(args.rounds), *config,
           *crawl_settings(args.concurrency), "-D", "db.ignore_external_links=true", *_variant(name)]
    env = crawler_env(tree)  # the `crawler` script puts its venv first; PYTHONPATH wins
    log = WORK / f"{name}-{tag}.log"
    t = timed(cmd, log, env)
    rows = pq.ParquetDataset(sorted(crawl.glob("segments/*/fetcher/part-*.parquet"))).read(
        columns=["url", "status", "fetch_time"]).to_pylist()
    ok = {r["url"] for r in rows if r["status"] == "success"}
    requested = sorted({r["url"] for r in rows if r["status"] != "robots_denied"})
    hist = _histogram([r["fetch_time"].timestamp() for r in rows if r["status"] == "success"])
    dump = subprocess.run([str(CRAWLER), "readdb", "--dump", "--format", "jsonl", *config], capture_output=True,
                          text=True, check=True, env={**os.environ, **env}, cwd=ROOT)
    known = [json.loads(line)["url"] for line in dump.stdout.splitlines() if line.strip()]
    errors = sum(1 for line in log.read_text(errors="replace").splitlines() if '"level": "error"' in line)
    run = WebRun(name, t["wall"], t["cpu"], t["rss_mb"], len(ok), hist, tree_rss_mb=t["tree_rss_mb"],
                 processes=t["processes"], rounds=len(list((crawl / "segments").glob("*"))),
                 external_queued=sum(1 for u in known if urlsplit(u).hostname not in served), log_errors=errors)
    return run, requested


def paired(mine: list[Run], theirs: list[Run]) -> str:
    """Run i's pages/s over the other contender's run i, run by run, and their median.

    The contenders of run i go one after the other, so each pair shares the minutes and the VM's speed of
    them; the ratio of two medians mixes runs of different minutes. The floor (one process) and the crawler
    (every core) do not slow alike when this VM does: the floor's CPU a page moved 0.80 -> 1.00 s / 1000 pages
    between two stops where the crawler's moved 1.82 -> 1.90 (docs/benchmarks.md).
    """
    ratios = [a.pages_per_second / b.pages_per_second for a, b in zip(mine, theirs, strict=False)
              if b.pages_per_second]
    if not ratios:
        return "no pair"
    return f"{', '.join(f'{x:.2f}' for x in ratios)} (median {statistics.median(ratios):.2f})"


def run_scrapy(seeds: Path, tag: str, args: argparse.Namespace, served: set[str]) -> WebRun:
    out = WORK / f"scrapy-{tag}.jsonl"
    out.unlink(missing_ok=True)
    # Allowed domains = the web's addresses: Scrapy drops every other host's request unresolved.
    t = timed([str(args.scrapy_python), str(PEERS / "scrapy_spider.py"), str(seeds), str(out),
               str(args.concurrency), "0", "2", ",".join(sorted(served))], WORK / f"scrapy-{tag}.log")
    first: dict[str, float] = {}
    with open(out) as fh:
        for line in fh:
            item = json.loads(line)
            first.setdefault(item["url"], item["t"])
    out.unlink()  # every page's text: hundreds of MB
    return WebRun("scrapy", t["wall"], t["cpu"], t["rss_mb"], len(first), _histogram(list(first.values())),
                  tree_rss_mb=t["tree_rss_mb"], processes=t["processes"])


def interleaved(urls: list[str]) -> list[str]:
    """One URL of each host in turn: a broad crawl's fetchlist mixes hosts, and the floor's workers take
    URLs in order (sorted, the first 256 would wait on one host's 2 connections)."""
    by_host: dict[str, list[str]] = {}
    for url in urls:
        by_host.setdefault(urlsplit(url).netloc, []).append(url)
    return [u for turn in zip_longest(*by_host.values()) for u in turn if u is not None]


def run_floor(urls: Path, tag: str, args: argparse.Namespace) -> WebRun:
    log = WORK / f"floor-{tag}.log"
    t = timed([str(args.scrapy_python), str(PEERS / "floor.py"), str(urls), str(args.concurrency), "2"], log)
    result = json.loads(log.read_text().strip().splitlines()[-1])
    return WebRun("floor", t["wall"], t["cpu"], t["rss_mb"], result["pages"],
                  {int(k): v for k, v in result["per_second"].items()}, tree_rss_mb=t["tree_rss_mb"],
                  processes=t["processes"])


def judged(log: Path, offset: int, web: Path, port: int, agent: str, name: str) -> tuple[Report, int]:
    """The observer's verdict on one run (each host's robots.txt as served, its Crawl-delay, 2 in flight,
    the spider trap) and the requests naming a host the web does not serve."""
    with open(log, encoding="utf-8") as fh:
        fh.seek(offset)
        requests = list(read_nginx(fh, str(log)))
    hosts = {d.name for d in web.iterdir() if d.is_dir()}
    origins = {f"http://{h}:{port}": Origin(robots=(web / h / "robots.txt").read_text(), in_flight=2, traps=(TRAP,))
               for h in hosts}
    total, _ = observe(requests, origins, agent=agent, min_delay=0.0, in_flight=2, name=name)
    # "-": a request line nginx answered 400 before any header (Scrapy's bare "%"), so no Host to judge
    return total, sum(1 for r in requests if r.host not in hosts and r.host != "-")


def row(runs: list[WebRun]) -> dict[str, float]:
    return {**median_row(runs), "tree_rss_mb": statistics.median(r.tree_rss_mb for r in runs),
            "processes": max(r.processes for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default=",".join(s.name for s in SITES), help="realsites.py's SITES to serve")
    parser.add_argument("--copies", type=int, default=2, help="loopback addresses each tree is served on")
    parser.add_argument("--hosts", type=int, default=100, help="generated hosts (at most 254)")
    parser.add_argument("--pages", type=int, default=50, help="pages per generated host")
    parser.add_argument("--small", action="store_true",
                        help="a quick check: django and gtk3 once each, 10 generated hosts of 20 pages")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--port", type=int, default=18480)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", default="crawler,crawler-all,scrapy,floor")
    parser.add_argument("--source", default=str(ROOT), help="the crawler's source tree (its crawler/ and config.yaml)")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                        help="contender NAME: the crawler from source tree DIR (name it in --only; *-all: crawler-all)")
    parser.add_argument("--scrapy-python", type=Path, default=ROOT / ".venv-bench" / "bin" / "python")
    parser.add_argument("--plot", type=Path, default=None, help="pages/s over the last run (default: in the work folder)")
    args = parser.parse_args()
    if args.small:
        args.trees, args.copies, args.hosts, args.pages = "django,gtk3", 1, 10, 20
    args.trees = args.trees.split(",") if args.trees else []
    unknown = set(args.trees) - {s.name for s in SITES}
    if unknown:
        raise SystemExit(f"--trees: unknown tree(s) {', '.join(sorted(unknown))}; known: {', '.join(s.name for s in SITES)}")
    if not 1 <= args.hosts <= 254:
        raise SystemExit("--hosts: 1 to 254 (127.0.1.1 is nginx's readiness probe)")
    for spec in args.tree:
        name, _, tree = spec.partition("=")
        TREES[name] = str(Path(tree).resolve())
    only = args.only.split(",")
    crawlers = [n for n in only if n in CRAWLER_VARIANTS or n in TREES]
    if set(only) - set(crawlers) - {"scrapy", "floor"}:
        raise SystemExit(f"--only: crawler, crawler-all, crawler-one, scrapy, floor or a --tree name, not {args.only}")
    needed = ([CRAWLER] if crawlers or "floor" in only else []) + ([args.scrapy_python] if {"scrapy", "floor"} & set(only) else [])
    for binary in needed:
        if not binary.exists():
            raise SystemExit(f"{binary} is missing: run `make bench-realweb` (it builds the virtualenvs)")
    WORK.mkdir(parents=True, exist_ok=True)
    web, seed_urls, kinds = build(args)
    served = set(kinds)
    seeds = WORK / "seeds.txt"
    seeds.write_text("\n".join(seed_urls) + "\n")
    print(f"web: {args.hosts} generated hosts x {args.pages} pages, {len(DELAYED)} Crawl-delay hosts, "
          f"{len(args.trees)} trees x {args.copies} addresses ({len(served)} hosts) on port {args.port}", flush=True)
    results: dict[str, list[WebRun]] = {n: [] for n in only}
    verdicts: dict[str, list[Report]] = {n: [] for n in only}
    foreign: dict[str, int] = dict.fromkeys(only, 0)
    access_log = WORK / "nginx" / "access.log"
    access_log.unlink(missing_ok=True)
    urls_file = WORK / "urls.txt"
    urls_file.unlink(missing_ok=True)  # from another web: the floor must not use it

    def crawl_urls(name: str, tag: str) -> WebRun:
        run, urls = run_crawler(seeds, name, tag, args, served)
        urls_file.write_text("\n".join(interleaved(urls)) + "\n")
        return run

    with Nginx(web, args.port, WORK / "nginx", access_log=access_log, locations=LOCATIONS) as server:
        for i in range(args.runs):
            for name in only[i % len(only):] + only[: i % len(only)]:
                if name == "floor" and not urls_file.exists():
                    crawl_urls("crawler", "urls")
                served_before, logged_before = server.cpu_seconds(), access_log.stat().st_size
                if name in crawlers:
                    run = crawl_urls(name, str(i))
                elif name == "scrapy":
                    run = run_scrapy(seeds, str(i), args, served)
                else:
                    run = run_floor(urls_file, str(i), args)
                run.server_cpu = server.cpu_seconds() - served_before
                results[name].append(run)
                verdict, strangers = judged(access_log, logged_before, web, args.port,
                                            "scrapy" if name == "scrapy" else "crawler", name)
                verdicts[name].append(verdict)
                foreign[name] += strangers
                print(f"run {i} {name:11s} {run.pages:6d} pages {run.wall:7.1f}s {run.pages_per_second:6.1f} p/s "
                      f"{run.cpu_per_1000:6.2f} cpu-s/1000 summed RSS {run.tree_rss_mb:6.0f} MB ({run.processes} "
                      f"processes; largest {run.rss_mb:.0f} MB)"
                      + (f" {run.rounds} rounds" if run.rounds is not None else ""), flush=True)
    rows = {name: row(runs) for name, runs in results.items() if runs}
    lines = ["| contender | pages/s | CPU s / 1000 pages | peak RSS MB, all processes summed (processes) "
             "| largest process MB | pages found | wall s | nginx CPU s / 1000 pages |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['pages_per_second']:.1f} | {r['cpu_per_1000']:.2f} | {r['tree_rss_mb']:.0f} "
                     f"({r['processes']}) | {r['rss_mb']:.0f} | {r['pages']:.0f} | {r['wall']:.1f} | "
                     f"{r['server_cpu_per_1000']:.2f} |")
    notes = []
    for name in crawlers:
        c = rows[name]
        if "scrapy" in rows:
            s = rows["scrapy"]
            notes.append(f"{name}/scrapy: pages/s {c['pages_per_second'] / s['pages_per_second']:.2f}x, CPU per page "
                         f"{c['cpu_per_1000'] / s['cpu_per_1000']:.2f}, summed RSS {c['tree_rss_mb'] / s['tree_rss_mb']:.2f}; "
                         f"pages/s run by run {paired(results[name], results['scrapy'])}")
        if "floor" in rows:
            notes.append(f"{name}/floor: pages/s {c['pages_per_second'] / rows['floor']['pages_per_second']:.2f}; "
                         f"run by run {paired(results[name], results['floor'])}")
        last = results[name][-1]
        notes.append(f"{name}: {last.rounds} rounds, {last.external_queued} webdb URLs on hosts not served, "
                     f"{last.log_errors} error lines logged")
    notes += [f"{name}: {n} requests naming a host the web does not serve" for name, n in foreign.items() if results[name]]
    politeness = table(combine(name, reports) for name, reports in verdicts.items() if reports)
    print("\n" + "\n".join(lines) + "\n\n" + "\n".join(notes))
    print(f"\nAs nginx saw it (bench/observer.py), summed over {args.runs} run(s):\n\n{politeness}")
    for name, reports in verdicts.items():
        if name != "floor":  # the floor asks no robots.txt: every request of it is "before robots.txt"
            for example in combine(name, reports).examples[:5]:
                print(f"  {name}: {example}")
    plot_path = args.plot or WORK / "realweb.png"
    plot({name: runs[-1].per_second for name, runs in results.items() if runs}, plot_path)
    out = WORK / "results.json"
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load": os.getloadavg(),
        "web": {"trees": args.trees, "copies": args.copies, "hosts": args.hosts, "pages": args.pages,
                "seed": args.seed, "served": len(served)},
        "settings": [*crawl_settings(args.concurrency), "-D", "db.ignore_external_links=true", "--rounds", str(args.rounds)],
        "runs": {name: [{k: v for k, v in asdict(r).items() if k != "per_second"} for r in runs]
                 for name, runs in results.items()},
        "table": lines, "notes": notes, "politeness": politeness.splitlines(),
    }, indent=1) + "\n")
    tmp.replace(out)
    print(f"plot: {plot_path}\nresults: {out}")


if __name__ == "__main__":
    main()
