"""Real sites as a test bed: Debian documentation trees crawled by the crawler and by wget (issue 16).

Each tree (real HTML written by others: large, densely linked, index pages with thousands of links)
is downloaded once with `apt-get download`, unpacked with `dpkg-deb -x` under bench/.work/realsites/,
and served by Debian's nginx at the root of its own loopback address (127.0.10.1, 127.0.10.2, ...),
with a robots.txt of ours that disallows one real folder of the tree. nginx's access log is the one
witness for every contender: what each requested, with which status and content type.

Ground truth is wget's recursive crawl of each site (no -H, so it stays on the site): the HTML pages
it fetched with status 200. The crawler runs `crawler crawl` on each site with the shipped defaults
except what a loopback bench must set (crawlargs.crawl_settings, plus db.ignore_external_links, the
same for every run). Report per site: HTML pages found against wget's, the pages wget found that the
crawler did not, requests into the disallowed folder, pages/s and CPU s per 1000 pages against
wget's, and every request or queued URL naming a host that is not the site (the trees link to the
real web; nothing of it may be queued, resolved or asked).

    make bench-realsites
    python3 bench/realsites.py [--tree DIR] [-D db.max_outlinks=5000 --label cap5000] [--only django,python]
    python3 bench/realsites.py --contenders wget,crawler --only more   # eight more HTML generators
    python3 bench/realsites.py --contenders wget --only all --daemon   # the daemon on all fifteen at once
    python3 bench/realsites.py --contenders wget --together            # one `crawl` of the seven at once

--daemon also runs `crawler daemon` seeded with every wanted site's root at once, as a user runs the
crawler, until it is idle with nothing due (every segment fetched and merged): each site's pages against
wget's, its requests into the Disallow, and its wall and CPU against wget's crawls one site after another.
--together does the same with one `crawler crawl` seeded with every wanted site's root (the command a user
runs for a list of sites, to its end), reported in the same form. Runs go run by run: run i of every site,
then run i of the daemon or the one `crawl`, which is also given against wget's run i (the sites one after
another, in the same minutes): this VM's speed moves by a third from hour to hour, wget's with it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crawlargs import crawl_settings, crawler_env  # noqa: E402
from nginx import Nginx, ensure_nginx  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("BENCH_WORK", ROOT / "bench" / ".work")) / "realsites"
CRAWLER = ROOT / ".venv-bench-crawler" / "bin" / "crawler"  # as compare.py: the crawler as a user installs it
PEERS = ROOT / "bench" / "peers"
SCRAPY_PYTHON = ROOT / ".venv-bench" / "bin" / "python"  # make bench-compare's peers virtualenv


@dataclass(frozen=True)
class Site:
    name: str
    package: str  # the Debian package, fetched at its candidate version
    root: str  # the HTML tree inside the package
    disallow: str  # robots.txt Disallow of ours: a real folder (a file-name prefix where the tree is flat)


# Chosen for size (a few hundred to a few thousand pages each, so a run stays modest on a shared
# machine) and for index pages that list thousands of links: Sphinx genindex pages (Django, Python),
# DocBook's bookindex (PostgreSQL), BoostBook's reference tree, gtk-doc's api-index-full.
SITES = [
    Site("django", "python-django-doc", "usr/share/doc/python-django-doc/html", "/internals/"),
    Site("python", "python3.11-doc", "usr/share/doc/python3.11/html", "/whatsnew/"),
    Site("postgres", "postgresql-doc-15", "usr/share/doc/postgresql-doc-15/html", "/ecpg"),  # flat tree
    Site("boost", "libboost1.81-doc", "usr/share/doc/libboost1.81-doc/doc/html", "/intrusive/"),
    Site("gtk3", "libgtk-3-doc", "usr/share/gtk-doc/html/gtk3", "/gtk3-"),  # flat tree: the tools' pages
    # API references whose pages are listed mostly by index pages of hundreds or thousands of links:
    # Doxygen's (libstdc++: the manual is disallowed, the API stays reachable from api.html) and
    # Sphinx autosummary's (SciPy: one page per function, listed by its module's page).
    Site("libstdcxx", "libstdc++-12-doc", "usr/share/doc/gcc-12-base/libstdc++", "/manual/"),
    Site("scipy", "python-scipy-doc", "usr/share/doc/python-scipy-doc/html", "/dev/"),
]
# `--only more`: eight more trees, each from an HTML generator the seven above do not use, for coverage
# rather than for the headline figure (which stays the seven's, comparable from run to run). Small and
# mid-sized, so their crawls are dominated by the crawler's fixed cost per crawl (start-up, the jobs).
# Apache's manual puts a byte-identical copy of each untranslated page in every language's folder: in-round
# following skips a repeated page's links (follow.py), so that tree takes three rounds.
MORE = [
    Site("apache", "apache2-doc", "usr/share/doc/apache2-doc/manual", "/de/"),  # XSLT; translations, copies
    Site("javadoc", "libcommons-lang3-java-doc", "usr/share/doc/libcommons-lang3-java/api",
         "/org/apache/commons/lang3/time/"),  # javadoc
    Site("vim", "vim-doc", "usr/share/doc/vim/html", "/ft_"),  # vim2html; flat, a few very large pages
    Site("cmake", "cmake-doc", "usr/share/doc/cmake-data/html", "/policy/"),  # Sphinx, other theme
    Site("octave", "octave-doc", "usr/share/doc/octave/octave.html", "/Sparse"),  # texinfo; flat
    Site("nodejs", "nodejs-doc", "usr/share/doc/nodejs/api", "/worker"),  # Node.js's doc tool; huge pages
    Site("wireshark", "wireshark-doc", "usr/share/doc/wireshark/wsug_html_chunked", "/ChapterStat"),  # AsciiDoc
    Site("mkdocs", "mkdocs-doc", "usr/share/doc/mkdocs/html", "/about/"),  # MkDocs
]
KNOWN = SITES + MORE  # a site's address is its place here
GROUPS = {"core": SITES, "more": MORE, "all": KNOWN}

# $server_addr names the site; $host is what the client asked for (any other name is a leak).
LOG_FORMAT = ('$msec $request_time $connection $server_addr $host "$request" $status $body_bytes_sent '
              '"$sent_http_content_type" "$http_user_agent"')
LINE = re.compile(r'^(\S+) (\S+) (\d+) (\S+) (\S*) "([^"]*)" (\d+) (\d+) "([^"]*)" "([^"]*)"$')

CONFIG = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  log_format bench '{log_format}';
  access_log {prefix}/access.log bench;
  sendfile on;
  keepalive_requests 100000;
  keepalive_timeout 60s;
  types {{
    text/html html htm; text/css css; text/plain txt; text/xml xml; application/javascript js;
    image/png png; image/gif gif; image/jpeg jpg jpeg; image/svg+xml svg; application/pdf pdf;
  }}
  default_type application/octet-stream;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
{servers}
}}
"""

SERVER = """  server {{
    listen {addr}:{port} backlog=4096;
    root {root};
    location = /robots.txt {{ alias {robots}; }}
  }}"""


def chosen(only: str) -> list[str]:
    """The site names ``--only`` names: sites, or the groups core, more and all, comma-separated."""
    wanted = [s.name for name in only.split(",") for s in GROUPS.get(name, [Site(name, "", "", "")])]
    unknown = set(wanted) - {s.name for s in KNOWN}
    if unknown:
        raise SystemExit(f"--only: unknown site(s) {', '.join(sorted(unknown))}")
    return wanted


def address(index: int) -> str:
    return f"127.0.10.{index + 1}"


def ensure(binary: str, package: str) -> None:
    """Install a Debian tool the bench runs (as bench/nginx.py installs nginx)."""
    if shutil.which(binary) is None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True, env=env)


def prepare(site: Site) -> Path:
    """The site's HTML root, downloading and unpacking the package only the first time."""
    debs, tree = WORK / "debs", WORK / "trees" / site.package
    done = tree / ".unpacked"
    if not done.exists():
        debs.mkdir(parents=True, exist_ok=True)
        if not list(debs.glob(f"{site.package}_*.deb")):
            subprocess.run(["apt-get", "download", "-q", site.package], cwd=debs, check=True)
        (deb,) = debs.glob(f"{site.package}_*.deb")
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
        done.write_text(deb.name + "\n")
    root = tree / site.root
    if not (root / "index.html").is_file():
        raise SystemExit(f"{site.package}: no index.html at {site.root}; has the package changed?")
    return root


class Sites(Nginx):
    """nginx serving each site at the root of its own loopback address, every request logged."""

    def __init__(self, sites: list[tuple[Site, Path]], port: int, prefix: Path) -> None:
        super().__init__(prefix, port, prefix)
        self.sites = sites
        self.log = self.prefix / "access.log"

    def __enter__(self) -> Sites:
        binary = ensure_nginx()
        self.prefix.mkdir(parents=True, exist_ok=True)
        servers = []
        for i, (site, root) in enumerate(self.sites):
            robots = self.prefix / f"robots-{site.name}.txt"
            robots.write_text(f"User-agent: *\nDisallow: {site.disallow}\n")
            servers.append(SERVER.format(addr=address(i), port=self.port, root=root.resolve(), robots=robots))
        conf = self.prefix / "nginx.conf"
        conf.write_text(CONFIG.format(prefix=self.prefix, log_format=LOG_FORMAT, servers="\n".join(servers)))
        self.proc = subprocess.Popen([binary, "-c", str(conf), "-p", str(self.prefix)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                subprocess.run(["wget", "-q", "-O", "/dev/null", "-U", "bench-probe",
                                f"http://{address(0)}:{self.port}/robots.txt"], check=True, timeout=2)
                return self
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"nginx did not start; see {self.prefix / 'error.log'}")

    def log_size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def requests_since(self, offset: int) -> list[dict]:
        rows = []
        with open(self.log, "rb") as fh:
            fh.seek(offset)
            for raw in fh:
                m = LINE.match(raw.decode("utf-8", "replace").rstrip("\n"))
                if not m:
                    raise RuntimeError(f"{self.log}: unreadable line {raw[:200]!r}")
                msec, rtime, conn, addr, host, request, status, size, ctype, agent = m.groups()
                method, _, rest = request.partition(" ")
                rows.append({"t": float(msec), "addr": addr, "host": host, "method": method,
                             "path": rest.rpartition(" ")[0] or rest, "status": int(status),
                             "type": ctype, "agent": agent})
        return rows


@dataclass
class Run:
    contender: str
    wall: float
    cpu: float
    rss_mb: float
    server_cpu: float
    requests: int = 0
    html: list[str] = field(default_factory=list)  # distinct paths served as text/html with 200
    statuses: dict[str, int] = field(default_factory=dict)
    disallowed: list[str] = field(default_factory=list)  # requests into the robots.txt Disallow
    foreign_hosts: dict[str, int] = field(default_factory=dict)  # Host headers that are not the site
    other_agents: int = 0  # lines in the run's window from another client (should be 0)
    queued_external: int = 0  # crawler only: webdb URLs on another host
    beyond_loopback: list[str] | None = None  # with --trace: addresses beyond loopback connected or sent to
    own_pages: int | None = None  # crawler only: webdb URLs with status fetched
    rounds: int | None = None  # crawler only: segments generated
    left: int | None = None  # crawler only: webdb URLs still unfetched or to retry when it stopped
    disallowed_known: int | None = None  # crawler only: webdb URLs in the Disallow (the rule had links to obey)

    @property
    def pages_per_second(self) -> float:
        return len(self.html) / self.wall if self.wall else 0.0

    @property
    def cpu_per_1000(self) -> float:
        return 1000 * self.cpu / len(self.html) if self.html else float("nan")


# --trace: every connect/send with an address, of the contender and all its processes, so a DNS query or
# a connection to any address beyond loopback shows (nginx's log sees only what reached nginx). strace
# filters in the kernel (seccomp-bpf) but still adds its own CPU: a confinement check, not a timing.
TRACE = ["strace", "--seccomp-bpf", "-f", "-qq", "-e", "signal=none",
         "-e", "trace=connect,sendto,sendmsg,sendmmsg"]
ADDRESS = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"')
TRACING: list[bool] = [False]


def outside_loopback(trace: Path) -> list[str]:
    """The addresses beyond 127.0.0.0/8 and ::1 that a traced run connected or sent to."""
    found = []
    for line in trace.read_text(errors="replace").splitlines():
        for v4, v6 in ADDRESS.findall(line):
            if not (v4.startswith("127.") or v6 in ("::1", "::ffff:127.0.0.1") or (v4 or v6) in ("0.0.0.0", "::")):
                found.append(v4 or v6)
    return found


def timed(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[int, float, float, float]:
    """Exit status, wall s, user+sys CPU s (the process and the children it waited for), peak RSS MB."""
    if TRACING[0]:
        cmd = [*TRACE, "-o", str(log.with_suffix(".strace")), *cmd]
    with open(log, "w") as out:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=WORK,
                                env={**os.environ, **env} if env else None)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def observe(server: Sites, run: Run, offset: int, addr: str, site: Site, agent: str, one_site: bool = False) -> None:
    """``run``'s requests from the access log past ``offset``: those of ``agent``, or (``one_site``, the
    daemon crawling every site at once) those of ``agent`` to the site's address."""
    rows = server.requests_since(offset)
    if one_site:
        rows = [r for r in rows if r["addr"] == addr]
    # "-": nginx answered 400 before reading the headers (a request line it rejects, e.g. a bare "%").
    mine = [r for r in rows if agent in r["agent"] or r["agent"] == "-"]
    run.other_agents = len(rows) - len(mine)
    run.requests = len(mine)
    for r in mine:
        run.statuses[str(r["status"])] = run.statuses.get(str(r["status"]), 0) + 1
        if r["host"] and r["host"] != addr:  # empty: a request nginx rejected before its headers
            run.foreign_hosts[r["host"]] = run.foreign_hosts.get(r["host"], 0) + 1
        if r["path"].startswith(site.disallow):
            run.disallowed.append(r["path"])
    run.html = sorted({r["path"] for r in mine if r["addr"] == addr and r["method"] == "GET"
                       and r["status"] == 200 and r["type"].startswith("text/html")})


def run_wget(server: Sites, site: Site, addr: str, tag: str) -> Run:
    out = WORK / f"wget-{site.name}"
    shutil.rmtree(out, ignore_errors=True)
    offset, served = server.log_size(), server.cpu_seconds()
    cmd = ["wget", "--recursive", "--level=inf", "--no-parent", "-e", "robots=on", "--no-verbose",
           "-P", str(out), f"http://{addr}:{server.port}/"]
    # Exit 8 is "the server answered an error" (the trees have broken links): expected, not a failure.
    status, wall, cpu, rss = timed(cmd, WORK / f"wget-{site.name}-{tag}.log")
    if status not in (0, 8):
        raise RuntimeError(f"wget failed (exit {status}); see {WORK / f'wget-{site.name}-{tag}.log'}")
    run = Run("wget", wall, cpu, rss, server.cpu_seconds() - served)
    observe(server, run, offset, addr, site, "Wget/")
    if TRACING[0]:
        run.beyond_loopback = outside_loopback(WORK / f"wget-{site.name}-{tag}.strace")
    shutil.rmtree(out, ignore_errors=True)
    return run


def crawl_command(crawler: Path, tree: Path, crawl: Path, seed: str, args: argparse.Namespace) -> list[str]:
    """The `crawl` of ``seed`` (a site's root, or several lines of them) into a fresh folder ``crawl`` (its seeds
    file beside it), from source ``tree``: the loopback bench's settings only (the same for every run),
    everything else as shipped."""
    shutil.rmtree(crawl, ignore_errors=True)
    crawl.mkdir(parents=True)
    seeds = crawl.with_suffix(".seeds")
    seeds.write_text(seed + "\n")
    return [str(crawler), "crawl", "--seeds", str(seeds), "--rounds", str(args.rounds), "--top-n", "10000000",
            *bench_config(tree, crawl, args)]


def bench_config(tree: Path, crawl: Path, args: argparse.Namespace) -> list[str]:
    """Every crawler run's config arguments: ``tree``'s config.yaml, crawl_dir ``crawl``, and the loopback
    bench's settings only (the same for every run, crawl or daemon), with the experiment's -D values."""
    return ["-c", str(tree / "config.yaml"), "-D", f"crawl_dir={crawl}", *crawl_settings(args.concurrency),
            "-D", "db.ignore_external_links=true", *[a for d in args.define for a in ("-D", d)]]


def at_info(cmd: list[str]) -> list[str]:
    """``cmd`` logging at info instead of the bench's warning: for a run read from its own log's events."""
    return [a if a != "log.level=warning" else "log.level=info" for a in cmd]


def no_errors_logged(log: Path, who: str) -> None:
    """A run that logged errors fails the bench: a crawl can end with exit 0 having fetched nothing (a plugin
    that failed to load)."""
    bugs = sum(1 for line in log.read_text(errors="replace").splitlines() if '"level": "error"' in line)
    if bugs:
        raise RuntimeError(f"{who} logged {bugs} errors; see {log}")


def crawl_succeeded(status: int, log: Path) -> None:
    """A `crawl` that failed, or logged errors, fails the bench."""
    if status != 0:
        raise RuntimeError(f"crawler failed (exit {status}); see {log}")
    no_errors_logged(log, "the crawl")


def run_crawler(server: Sites, site: Site, addr: str, tag: str, args: argparse.Namespace) -> Run:
    crawl = WORK / f"crawl-{args.label}-{site.name}"
    tree = Path(args.tree).resolve()
    config = ["-c", str(tree / "config.yaml"), "-D", f"crawl_dir={crawl}"]
    cmd = crawl_command(args.crawler, tree, crawl, f"http://{addr}:{server.port}/", args)
    env = crawler_env(tree)  # the `crawler` script puts its venv first; PYTHONPATH wins
    offset, served = server.log_size(), server.cpu_seconds()
    log = WORK / f"crawler-{args.label}-{site.name}-{tag}.log"
    status, wall, cpu, rss = timed(cmd, log, env)
    crawl_succeeded(status, log)
    run = Run("crawler", wall, cpu, rss, server.cpu_seconds() - served)
    observe(server, run, offset, addr, site, "crawler/")
    if TRACING[0]:
        run.beyond_loopback = outside_loopback(log.with_suffix(".strace"))
    dump = subprocess.run([str(args.crawler), "readdb", "--dump", "--format", "jsonl", *config],
                          capture_output=True, text=True, check=True, env={**os.environ, **env}, cwd=WORK)
    rows = [json.loads(line) for line in dump.stdout.splitlines() if line.strip()]
    run.queued_external = sum(1 for r in rows if urlsplit(r["url"]).hostname != addr)
    run.own_pages = sum(1 for r in rows if r["status"] == "fetched")
    run.left = sum(1 for r in rows if r["status"] in ("unfetched", "retry"))
    run.rounds = len(list((crawl / "segments").glob("*")))
    run.disallowed_known = sum(1 for r in rows if (urlsplit(r["url"]).path or "/").startswith(site.disallow))
    return run


def roots(server: Sites, sites: list[Site]) -> str:
    """A seeds file of every site's root, for a run that crawls them all at once."""
    return "".join(f"http://{address(KNOWN.index(site))}:{server.port}/\n" for site in sites)


def each_site(server: Sites, sites: list[Site], offset: int, contender: str, wall: float, cpu: float,
              rss_mb: float) -> dict[str, Run]:
    """Each site's share of a run that crawled them all at once (the whole run's wall, CPU and memory): its
    requests, read from the access log past ``offset`` by the site's address."""
    runs = {}
    for site in sites:
        run = Run(contender, wall, cpu, rss_mb, 0.0)
        observe(server, run, offset, address(KNOWN.index(site)), site, "crawler/", one_site=True)
        runs[site.name] = run
    return runs


_DAEMON_LIMIT = 1800  # s: a daemon that never gets idle (a URL always due again) must not hang the bench


def run_daemon(server: Sites, sites: list[Site], tag: str, args: argparse.Namespace) -> tuple[float, float, dict[str, Run]]:
    """`crawler daemon` seeded with every site's root at once, as a user runs the crawler: its wall and CPU to
    its first ``daemon.idle`` with nothing due (every segment fetched and merged), and each site's requests.
    The daemon logs at info for that event; it is then stopped with SIGTERM and must exit 0."""
    work = WORK / f"daemon-{args.label}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "seeds").mkdir(parents=True)
    (work / "seeds" / "roots.txt").write_text(roots(server, sites))
    tree = Path(args.tree).resolve()
    cmd = at_info([str(args.crawler), "daemon", "-D", f"daemon.seeds={work / 'seeds'}", "-D", "metrics.listen=",
                   *bench_config(tree, work / "crawl", args)])  # the experiment's -D values last: they win
    log = WORK / f"daemon-{args.label}-{tag}.log"
    offset = server.log_size()
    idle = '"reason": "nothing due"'
    with open(log, "w") as out, open(log, errors="replace") as tail:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=out, cwd=WORK,
                                env={**os.environ, **crawler_env(tree)})
        wall, seen = None, ""
        while wall is None:  # the log read as it grows: a whole read each time would take CPU from the crawl
            time.sleep(0.05)
            if proc.poll() is not None:
                raise RuntimeError(f"the daemon exited ({proc.returncode}) before it was idle; see {log}")
            if time.monotonic() - start > _DAEMON_LIMIT:
                proc.kill()
                proc.wait()
                raise RuntimeError(f"the daemon was not idle after {_DAEMON_LIMIT} s; see {log}")
            seen = seen[-len(idle):] + tail.read()
            if idle in seen:
                wall = time.monotonic() - start
        proc.send_signal(signal.SIGTERM)
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the daemon exited {os.waitstatus_to_exitcode(status)} on SIGTERM; see {log}")
    no_errors_logged(log, "the daemon")
    return wall, usage.ru_utime + usage.ru_stime, each_site(server, sites, offset, "daemon", wall, 0.0,
                                                             usage.ru_maxrss / 1024)


def run_together(server: Sites, sites: list[Site], tag: str, args: argparse.Namespace) -> tuple[float, float, dict[str, Run]]:
    """One `crawler crawl` seeded with every site's root at once, to its end: its wall and CPU, and each site's
    requests (as ``run_daemon``'s)."""
    crawl = WORK / f"together-{args.label}"
    tree = Path(args.tree).resolve()
    cmd = crawl_command(args.crawler, tree, crawl, roots(server, sites).rstrip("\n"), args)  # a fresh folder
    log = WORK / f"together-{args.label}-{tag}.log"
    offset = server.log_size()
    status, wall, cpu, rss = timed(cmd, log, crawler_env(tree))
    crawl_succeeded(status, log)
    return wall, cpu, each_site(server, sites, offset, "crawler", wall, cpu, rss)


def at_once_json(runs: list[tuple[float, float, dict[str, Run]]]) -> list[dict[str, object]]:
    """Runs of every site at once as results.json keeps them: each run's wall and CPU, each site's share."""
    return [{"wall": wall, "cpu": cpu, "sites": {name: {**asdict(run), "pages": len(run.html)}
                                                 for name, run in by_site.items()}}
            for wall, cpu, by_site in runs]


def at_once_report(results: dict[str, dict[str, Run]], runs: list[tuple[float, float, dict[str, Run]]],
                  sites: list[Site], who: str = "The daemon", until: str = "to its idle") -> list[str]:
    """Each site's pages as ``who`` found them, all sites crawled at once, against wget's one by one."""
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    lines = [f"| site | {who}'s HTML pages | of wget's | missed | extra | disallowed requests | requests | foreign Host |",
             "|---|---|---|---|---|---|---|---|"]
    pages = common = wget_pages = 0
    wget_wall = 0.0
    for site in sites:
        w, d = results[site.name]["wget"], runs[0][2][site.name]
        shared = set(w.html) & set(d.html)
        pages, common, wget_pages, wget_wall = pages + len(d.html), common + len(shared), wget_pages + len(w.html), wget_wall + w.wall
        lines.append(f"| {site.name} | {len(d.html)} | {100 * len(shared) / len(w.html):.1f}% | {len(set(w.html) - shared)} "
                     f"| {len(set(d.html) - shared)} | {len(d.disallowed)} | {d.requests} | {sum(d.foreign_hosts.values())} |")
    lines += [f"{name}: {run.other_agents} requests from another client during the run"
              for name, run in runs[0][2].items() if run.other_agents]
    lines += ["", f"{who}, every site at once: {pages} HTML pages ({100 * common / wget_pages:.1f}% of wget's) in "
              f"{wall:.2f} s {until} (median of {len(runs)}; runs {', '.join(f'{r[0]:.2f}' for r in runs)}), "
              f"{pages / wall:.0f} pages/s, {1000 * cpu / max(pages, 1):.2f} CPU s / 1000 pages; wget, one site "
              f"after another: {wget_wall:.2f} s, {wget_pages / wget_wall:.0f} pages/s: "
              f"**{(pages / wall) / (wget_pages / wget_wall):.2f}x**."]
    return lines


def paired(every: dict[str, dict[str, list[Run]]], runs: list[tuple[float, float, dict[str, Run]]],
           sites: list[Site]) -> str:
    """Each run of every site at once against wget's run of the same minutes (the sites one after another):
    pages/s over pages/s, run by run, and their median."""
    ratios = []
    for i, (wall, _cpu, by_site) in enumerate(runs):
        wget = [every[site.name]["wget"][i] for site in sites]
        wget_rate = sum(len(r.html) for r in wget) / max(sum(r.wall for r in wget), 1e-9)
        ratios.append(sum(len(by_site[site.name].html) for site in sites) / max(wall, 1e-9) / wget_rate)
    return (f"Paired with wget's run of the same minutes: {', '.join(f'{x:.2f}x' for x in ratios)} "
            f"(median **{statistics.median(ratios):.2f}x**).")


def run_scrapy(server: Sites, site: Site, addr: str, tag: str, args: argparse.Namespace) -> Run:
    out = WORK / f"scrapy-{site.name}.jsonl"
    out.unlink(missing_ok=True)
    seeds = WORK / f"scrapy-{site.name}.seeds"
    seeds.write_text(f"http://{addr}:{server.port}/\n")
    # Allowed domains = the site: Scrapy drops every other host's request before it is resolved.
    cmd = [str(args.scrapy_python), str(PEERS / "scrapy_spider.py"), str(seeds), str(out),
           str(args.concurrency), "0", "2", addr]
    offset, served = server.log_size(), server.cpu_seconds()
    log = WORK / f"scrapy-{site.name}-{tag}.log"
    status, wall, cpu, rss = timed(cmd, log)
    if status != 0:
        raise RuntimeError(f"scrapy failed (exit {status}); see {log}")
    run = Run("scrapy", wall, cpu, rss, server.cpu_seconds() - served)
    observe(server, run, offset, addr, site, "Scrapy/")
    if TRACING[0]:
        run.beyond_loopback = outside_loopback(log.with_suffix(".strace"))
    out.unlink(missing_ok=True)
    return run


# The tree's runtime dependencies, installed into the crawler's virtualenv when it lacks one: a tree
# under test (merged main, say) may need a package the virtualenv was built without.
_MISSING = """
import importlib.metadata, re, sys, tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
def have(req):
    try:
        importlib.metadata.distribution(re.split(r"[<>=!~;\\[ ]", req, maxsplit=1)[0])
        return True
    except importlib.metadata.PackageNotFoundError:
        return False
print("\\n".join(d for d in deps if not have(d)))
"""


def ensure_dependencies(crawler: Path, tree: Path) -> None:
    python, pyproject = crawler.parent / "python", tree / "pyproject.toml"
    if not pyproject.exists():
        return
    found = subprocess.run([str(python), "-c", _MISSING, str(pyproject)], capture_output=True, text=True, check=True)
    missing = [line for line in found.stdout.splitlines() if line.strip()]
    if missing:
        print(f"installing the tree's missing dependencies into {crawler.parent.parent}: {', '.join(missing)}")
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *missing], check=True)


def run_by_run(every: dict[str, dict[str, list[Run]]], runs: int) -> dict[str, list[float]]:
    """Per contender but wget, run i's pages/s over all sites (pages over summed walls) against wget's run i:
    the spread a set's medians hide (this VM's speed moves from one run to the next)."""
    if runs < 2 or not every or any("wget" not in by_name for by_name in every.values()):
        return {}

    def rate(name: str, i: int) -> float:
        picked = [by_name[name][i] for by_name in every.values()]
        return sum(len(r.html) for r in picked) / max(sum(r.wall for r in picked), 1e-9)

    names = [name for name in next(iter(every.values())) if name != "wget"]
    return {name: [rate(name, i) / rate("wget", i) for i in range(runs)] for name in names}


def median_run(runs: list[Run]) -> Run:
    """The first run's observations with the median wall and CPU of all runs."""
    first = runs[0]
    return Run(**{**asdict(first), "wall": statistics.median(r.wall for r in runs),
                  "cpu": statistics.median(r.cpu for r in runs),
                  "rss_mb": statistics.median(r.rss_mb for r in runs),
                  "server_cpu": statistics.median(r.server_cpu for r in runs)})


def report(results: dict[str, dict[str, Run]], sites: list[Site], show: int) -> list[str]:
    """One row per site and contender, measured against wget's run of the same site, then the notes."""
    lines = ["| site | contender | HTML pages | of wget's | missed | extra | disallowed requests | requests "
             "| pages/s | x wget | CPU s / 1000 pages | x wget | foreign Host / queued | rounds (URLs left) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    totals: dict[str, list[float]] = {}
    for site in sites:
        w = results[site.name]["wget"]
        for name, run in results[site.name].items():
            missed = sorted(set(w.html) - set(run.html))
            extra = sorted(set(run.html) - set(w.html))
            share = 100 * len(set(w.html) & set(run.html)) / len(w.html) if w.html else float("nan")
            queued = "" if name != "crawler" else f" / {run.queued_external}"
            rounds = "" if run.rounds is None else f"{run.rounds} ({run.left})"
            denied = "" if run.disallowed_known is None else f" ({run.disallowed_known} known)"
            lines.append(
                f"| {site.name} | {name} | {len(run.html)} | {share:.1f}% | {len(missed)} | {len(extra)} | "
                f"{len(run.disallowed)}{denied} | {run.requests} | {run.pages_per_second:.0f} | "
                f"{run.pages_per_second / w.pages_per_second:.2f} | {run.cpu_per_1000:.2f} | "
                f"{run.cpu_per_1000 / w.cpu_per_1000:.2f} | {sum(run.foreign_hosts.values())}{queued} | {rounds} |")
            total = totals.setdefault(name, [0, 0, 0.0, 0.0])
            total[0] += len(run.html)
            total[1] += len(set(w.html) & set(run.html))
            total[2] += run.wall
            total[3] += run.cpu
            if name != "wget" and missed:
                notes.append(f"{site.name}: wget found, {name} did not: {', '.join(missed[:show])}"
                             + (" ..." if len(missed) > show else ""))
            if name != "wget" and extra:
                notes.append(f"{site.name}: {name} found, wget did not: {', '.join(extra[:show])}"
                             + (" ..." if len(extra) > show else ""))
            if run.disallowed:
                notes.append(f"{site.name}: {name} requested the disallowed {site.disallow}: {run.disallowed[:show]}")
            if run.foreign_hosts:
                notes.append(f"{site.name}: {name} sent foreign Host headers: {run.foreign_hosts}")
            if run.beyond_loopback is not None:
                beyond = ": " + ", ".join(sorted(set(run.beyond_loopback))) if run.beyond_loopback else ""
                notes.append(f"{site.name}: {name} (traced) connected or sent to "
                             f"{len(run.beyond_loopback)} addresses beyond loopback{beyond}")
            if run.left:
                notes.append(f"{site.name}: {name} stopped after {run.rounds} rounds with {run.left} URLs "
                             "unfetched or to retry (raise --rounds)")
            if run.other_agents:
                notes.append(f"{site.name}: {run.other_agents} requests from another client during {name}'s run")
    wget_pages, _, wget_wall, wget_cpu = totals["wget"]
    for name, (pages, common, wall, cpu) in totals.items():
        pps, per1000 = pages / wall, 1000 * cpu / max(pages, 1)
        lines.append(f"| all | {name} | {pages} | {100 * common / wget_pages:.1f}% | | | | | {pps:.0f} | "
                     f"{pps / (wget_pages / wget_wall):.2f} | {per1000:.2f} | "
                     f"{per1000 / (1000 * wget_cpu / wget_pages):.2f} | | |")
    return lines + [""] + notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", default=str(ROOT), help="the crawler's source tree (its crawler/ and config.yaml)")
    parser.add_argument("--crawler", type=Path, default=CRAWLER, help="the crawler script (a user's install)")
    parser.add_argument("-D", dest="define", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra crawler override (an experiment, not the bench settings), e.g. db.max_outlinks=5000")
    parser.add_argument("--label", default="defaults", help="names this configuration's crawl folders and results")
    parser.add_argument("--contenders", default="wget,crawler,scrapy",
                        help="wget is always run: it is the ground truth")
    parser.add_argument("--scrapy-python", type=Path, default=SCRAPY_PYTHON)
    parser.add_argument("--daemon", action="store_true",
                        help="after the sites one by one, `crawler daemon` on all of them at once (each --runs)")
    parser.add_argument("--together", action="store_true",
                        help="after the sites one by one, one `crawler crawl` of all of them at once (each --runs)")
    parser.add_argument("--only", default="core", help="sites by name, or core (the seven of the headline "
                        "figure), more (eight more HTML generators) or all")
    parser.add_argument("--runs", type=int, default=1, help="runs per contender, alternating; medians of times")
    parser.add_argument("--rounds", type=int, default=200, help="crawl rounds at most (it stops when nothing is due)")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--port", type=int, default=18380)
    parser.add_argument("--show", type=int, default=5, help="missed URLs listed per site")
    parser.add_argument("--trace", action="store_true",
                        help="run each contender under strace and report every address beyond loopback it "
                             "connected or sent to (a DNS query included); its times then include strace's")
    args = parser.parse_args()
    TRACING[0] = args.trace
    contenders = ["wget", *(c for c in args.contenders.split(",") if c != "wget")]
    if set(contenders) - {"wget", "crawler", "scrapy"}:
        raise SystemExit(f"--contenders: wget, crawler or scrapy, not {args.contenders}")
    if "scrapy" in contenders and not args.scrapy_python.exists():
        raise SystemExit(f"{args.scrapy_python} is missing: run `make bench-realsites` (it builds the virtualenv)")
    if "crawler" in contenders and not args.crawler.exists():
        raise SystemExit(f"{args.crawler} is missing: run `make bench-realsites` (it builds the virtualenv)")
    wanted = chosen(args.only)
    WORK.mkdir(parents=True, exist_ok=True)
    if "crawler" in contenders:
        ensure_dependencies(args.crawler, Path(args.tree).resolve())
    ensure("wget", "wget")
    if args.trace:
        ensure("strace", "strace")
    # The seven are always served, the eight more when one of them is wanted (each site keeps its address
    # whatever --only says); only the wanted ones are crawled.
    serve = KNOWN if set(wanted) & {s.name for s in MORE} else SITES
    served = [(site, prepare(site)) for site in serve]
    sites = [s for s in KNOWN if s.name in wanted]
    # site -> contender -> its runs, for the run-by-run figures
    every: dict[str, dict[str, list[Run]]] = {site.name: {name: [] for name in contenders} for site in sites}
    daemon_runs: list[tuple[float, float, dict[str, Run]]] = []
    together_runs: list[tuple[float, float, dict[str, Run]]] = []
    with Sites(served, args.port, WORK / "nginx") as server:
        # Run by run: each run of every site, then the daemon's and the one `crawl`'s run of them all, so that
        # each run of those is paired with wget's run of the same minutes (this VM's speed moves by the hour).
        for i in range(args.runs):
            for site in sites:
                addr = address(KNOWN.index(site))
                for name in contenders[i % len(contenders):] + contenders[:i % len(contenders)]:
                    if name == "wget":
                        run = run_wget(server, site, addr, str(i))
                    elif name == "crawler":
                        run = run_crawler(server, site, addr, str(i), args)
                    else:
                        run = run_scrapy(server, site, addr, str(i), args)
                    every[site.name][name].append(run)
                    print(f"{site.name:9s} run {i} {name:8s} {len(run.html):6d} HTML pages {run.requests:6d} requests "
                          f"{run.wall:7.2f}s {run.pages_per_second:6.0f} p/s {run.cpu_per_1000:6.2f} CPU s/1000 "
                          f"{len(run.disallowed)} disallowed"
                          + (f" {run.rounds} rounds, {run.left} URLs left" if run.rounds is not None else ""), flush=True)
            if args.daemon:
                daemon_runs.append(run_daemon(server, sites, str(i), args))
            if args.together:
                together_runs.append(run_together(server, sites, str(i), args))
                print(f"together  run {i} crawler  {together_runs[-1][0]:7.2f}s", flush=True)
    results = {site: {name: median_run(r) for name, r in runs.items()} for site, runs in every.items()}
    lines = report(results, sites, args.show)
    by_run = run_by_run(every, args.runs)
    if by_run:
        lines += ["", "Run by run, each contender's pages over its summed walls, against wget's: "
                  + "; ".join(f"{name} " + ", ".join(f"{x:.3f}" for x in ratios) for name, ratios in by_run.items())]
    if daemon_runs:
        lines += ["", *at_once_report(results, daemon_runs, sites), paired(every, daemon_runs, sites)]
    if together_runs:
        lines += ["", *at_once_report(results, together_runs, sites, "One `crawl`", "to its end"),
                  paired(every, together_runs, sites)]
    print("\n" + "\n".join(lines))
    out = WORK / f"results-{args.label}.json"
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({
        "label": args.label, "contenders": contenders, "tree": str(Path(args.tree).resolve()), "defines": args.define,
        "settings": crawl_settings(args.concurrency) + ["-D", "db.ignore_external_links=true"],
        "runs": args.runs, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sites": {s.name: {"package": (WORK / "trees" / s.package / ".unpacked").read_text().strip(),
                           "address": address(KNOWN.index(s)), "disallow": s.disallow,
                           **{name: {**asdict(run), "pages": len(run.html), "pages_per_second": run.pages_per_second,
                                     "cpu_per_1000": run.cpu_per_1000}
                              for name, run in results[s.name].items()}}
                  for s in sites},
        "daemon": at_once_json(daemon_runs),
        "together": at_once_json(together_runs),
        "run_by_run": by_run,
        "walls": {site: {name: [run.wall for run in runs] for name, runs in by_name.items()}
                  for site, by_name in every.items()},
        "table": lines,
    }, indent=1) + "\n")
    tmp.rename(out)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
