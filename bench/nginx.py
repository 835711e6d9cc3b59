"""Start nginx (Debian's package) serving the generated web on loopback, for the benchmarks.

One server block, listening on each host's own loopback address only (never on
every interface): ``root`` is chosen by the Host header, so each 127.0.1.N
address is a distinct site. Pre-gzipped files are served as they are,
so the server spends no CPU compressing during a run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from observer import NGINX_LOG_FORMAT

CONFIG = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 8192; }}
http {{
{access_log}
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  keepalive_timeout 60s;
  gzip_static on;
  types {{ text/html html; text/plain txt; }}
  default_type text/html;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  server {{
{listens}
    root {webroot}/$host;
    location /moved/ {{ rewrite ^/moved/(.*)$ /p/$1 permanent; }}
{locations}
  }}
}}
"""


def ensure_nginx() -> str:
    path = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if path:
        return path
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "nginx-light"], check=True, env=env)
    return shutil.which("nginx") or "/usr/sbin/nginx"


class Nginx:
    def __init__(self, webroot: Path, port: int, prefix: Path, access_log: Path | None = None,
                 locations: str = "") -> None:
        self.webroot, self.port, self.prefix = webroot.resolve(), port, prefix.resolve()
        self.locations = locations  # more location blocks of the one server (bench/realweb.py: slow pages, a trap)
        # The observer's log (bench/observer.py): off unless asked for, so other benches' figures stay as they were.
        self.access_log = access_log.resolve() if access_log else None
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Nginx:
        binary = ensure_nginx()
        self.prefix.mkdir(parents=True, exist_ok=True)
        conf = self.prefix / "nginx.conf"
        log = "  access_log off;"
        if self.access_log is not None:
            log = f"  log_format observer '{NGINX_LOG_FORMAT}';\n  access_log {self.access_log} observer;"
        conf.write_text(CONFIG.format(prefix=self.prefix, webroot=self.webroot, listens=self._listens(),
                                      access_log=log, locations=self.locations))
        self.proc = subprocess.Popen([binary, "-c", str(conf), "-p", str(self.prefix)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.1.1:{self.port}/robots.txt", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.1)
        self.__exit__()  # a server that never answered must not outlive the bench
        raise RuntimeError(f"nginx did not start; see {self.prefix / 'error.log'}")

    def cpu_seconds(self) -> float:
        """User+sys CPU so far of the master and its workers: what serving took of the shared cores."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for pid in [self.proc.pid, *self._children()] if self.proc else []:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        return total

    def _children(self) -> list[int]:
        try:
            return [int(c) for c in Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()]
        except OSError:
            return []

    def _listens(self) -> str:
        # One listen per host folder (each a 127.x address): a bench must not open a port beyond loopback.
        hosts = sorted(d.name for d in self.webroot.iterdir() if d.is_dir() and d.name.startswith("127."))
        backlog = " backlog=4096"  # nginx takes socket options once per address:port
        return "\n".join(f"    listen {host}:{self.port}{backlog};" for host in hosts or ["127.0.0.1"])

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
