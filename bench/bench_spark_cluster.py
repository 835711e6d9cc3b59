"""Crawl a local multi-host web with the jobs on a standalone Spark cluster (a master and 2 workers on loopback).

Run: .venv/bin/python bench/bench_spark_cluster.py [--hosts 8] [--pages 30] [--rounds 3] [--workers 2]
                                                  [--worker-memory 1g] [--dir /tmp/bench-spark-cluster] [--keep]
                                                  [--webdb-urls 1000000] [--s3]

Starts, from the pyspark package (its ``bin/spark-class`` and the ``java`` on
PATH), a Spark master (``org.apache.spark.deploy.master.Master``) and
``--workers`` workers (``deploy.worker.Worker``, 1 core and ``--worker-memory``
each), all bound to 127.0.0.1. Generates a web of ``--hosts`` sites
(bench/sitegen.py: hosts are the addresses 127.0.1.N, so no name is ever
resolved) served by nginx (bench/nginx.py), then runs ``crawler crawl --rounds
N`` twice on it: with ``jobs.engine: duckdb``, and with ``jobs.engine: spark``
and ``spark.master: spark://127.0.0.1:PORT`` (the ``crawler`` process is the
driver; its executors run on the workers). Checks that both crawls end with the
same webdb (pages, links) and linkdb, stops the cluster and nginx by PID, and
prints each job's time per engine (from the ``*.done`` events of the crawl's
JSON log: a job's time runs from the previous event to its own, so the Spark
session's start counts in the first job, inject) and a Markdown table for
docs/benchmarks.md. With ``--webdb-urls N`` it also runs bench/bench_webdb.py's
jobs (N URLs, N/10 fetched pages) on the cluster before stopping it.

With ``--s3`` both crawls go to ``crawl_dir: s3://BUCKET/...`` on moto's S3
server (a subprocess on 127.0.0.1, stopped by PID) and run the cycle step by
step (inject, then per round generate, fetch, updatedb, invertlinks, one
``crawler`` process each): the Spark commands' executors read and write the
bucket themselves (docs/scale-out.md, "Spark jobs on an s3:// crawl_dir"), with
the credentials the driver hands them (the workers' environment has none).
It prints each command's wall time per engine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from nginx import Nginx  # noqa: E402
from sitegen import generate  # noqa: E402

JOBS = ("inject", "generate", "fetch", "updatedb", "invertlinks")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A standalone Spark master and workers on 127.0.0.1, started from the pyspark package, stopped by PID."""

    def __init__(self, folder: Path, workers: int, memory: str) -> None:
        import pyspark

        self.spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
        self.folder, self.workers, self.memory = folder, workers, memory
        self.port, self.ui_port = free_port(), free_port()
        self.procs: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "384m",
               "SPARK_LOG_DIR": str(self.folder), "SPARK_WORKER_DIR": str(self.folder / "work"),
               # The master's REST submission server has a fixed port (6066): two benches would collide.
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        log = (self.folder / f"{name}.log").open("wb")
        # spark-class execs the JVM, so this PID is the daemon's own.
        self.procs.append(subprocess.Popen([str(self.spark_class), *args], env=env, stdout=log, stderr=log))

    def __enter__(self) -> Cluster:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for n in range(self.workers):
            self._start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--webui-port", str(free_port()), "--cores", "1", "--memory", self.memory,
                        "--work-dir", str(self.folder / f"work-{n}"), self.master_url)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as resp:
                    if json.load(resp).get("aliveworkers", 0) >= self.workers:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.__exit__()
        raise SystemExit(f"Spark cluster did not start; see the logs in {self.folder}")

    def __exit__(self, *exc: object) -> None:
        for proc in reversed(self.procs):  # workers first: each stops its executors
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def job_times(stderr: str, started: datetime) -> dict[str, list[float]]:
    """Seconds per job from the crawl's JSON log: each ``*.done`` event closes the time since the previous one."""
    times: dict[str, list[float]] = defaultdict(list)
    last = started
    for line in stderr.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        name = str(event.get("event", "")) if isinstance(event, dict) else ""
        job = name.removesuffix(".done")
        if job in JOBS and name.endswith(".done"):
            ts = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).replace(tzinfo=None)
            times[job].append((ts - last).total_seconds())
            last = ts
    return times


def crawl(crawl_dir: Path, seeds: Path, rounds: int, top_n: int, config: Path | None) -> tuple[float, dict]:
    args = [sys.executable, "-m", "crawler", "crawl", "--seeds", str(seeds), "--rounds", str(rounds),
            "--top-n", str(top_n), "-D", f"crawl_dir={crawl_dir}", "-D", "http.allow_private_networks=true",
            "-D", "fetcher.min_delay=0", "-D", "fetcher.concurrency=32", "-D", "log.format=json"]
    if config is not None:
        args[3:3] = ["-c", str(config)]
    started = datetime.now(UTC).replace(tzinfo=None)
    clock = time.perf_counter()
    done = subprocess.run(args, cwd=crawl_dir.parent, capture_output=True, text=True, check=False,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    seconds = time.perf_counter() - clock
    if done.returncode != 0:
        raise SystemExit(f"crawl in {crawl_dir} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, job_times(done.stderr, started)


def current_rows(store: Path, table: str, keys: tuple[str, ...], columns: tuple[str, ...]) -> list[tuple]:
    version = store / (store / "CURRENT").read_text().strip()
    rows = [r for f in sorted((version / table).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    picked = [tuple(round(r[c], 9) if isinstance(r[c], float) else r[c] for c in columns) for r in rows]
    return sorted(picked, key=lambda r: tuple(str(r[columns.index(k)]) for k in keys))


def outcome(crawl_dir: Path) -> dict[str, Any]:
    """What both engines must agree on (fetch and schedule times differ from run to run)."""
    return {
        "pages": current_rows(crawl_dir / "webdb", "pages", ("url",),
                              ("url", "status", "http_status", "digest", "num_outlinks", "retries", "score")),
        "links": current_rows(crawl_dir / "webdb", "links", ("from_url", "to_url"), ("from_url", "to_url", "anchor")),
        "inlinks": current_rows(crawl_dir / "linkdb", "inlinks", ("to_url", "from_url"),
                                ("to_url", "from_url", "anchor")),
    }


class Moto:
    """moto's S3 server on 127.0.0.1 with one bucket, stopped by PID."""

    CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1"}

    def __init__(self, bucket: str) -> None:
        self.port, self.bucket = free_port(), bucket
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="bench", aws_secret_access_key="bench")

    def __enter__(self) -> Moto:
        server = Path(sys.executable).with_name("moto_server")
        self.proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise SystemExit("moto_server did not start") from None
                time.sleep(0.1)
        self.client().create_bucket(Bucket=self.bucket)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def mirror(self, prefix: str, dest: Path) -> Path:
        """A local copy of the crawl_dir below ``prefix`` (to compare with the same readers as a local crawl)."""
        client = self.client()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix + "/"):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(prefix) + 1:]
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                client.download_file(self.bucket, obj["Key"], str(dest / rel))
        return dest


def s3_cycle(moto: Moto, prefix: str, work: Path, seeds: Path, rounds: int, top_n: int,
             config: Path | None) -> tuple[float, dict]:
    """inject, then per round generate, fetch, updatedb, invertlinks on s3://BUCKET/PREFIX; seconds per command."""
    common = ["-D", f"crawl_dir=s3://{moto.bucket}/{prefix}", "-D", f"storage.endpoint={moto.endpoint}",
              "-D", f"storage.staging_dir={work / 'staging' / prefix}", "-D", "http.allow_private_networks=true",
              "-D", "fetcher.min_delay=0", "-D", "fetcher.concurrency=32", "-D", "log.format=json"]
    if config is not None:
        common = ["-c", str(config), *common]
    env = {**os.environ, **Moto.CREDENTIALS, "SPARK_LOCAL_IP": "127.0.0.1"}
    times: dict[str, list[float]] = defaultdict(list)

    def run(command: str, *args: str) -> str:
        clock = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "crawler", command, *args, *common], cwd=work,
                              capture_output=True, text=True, check=False, env=env)
        times[command].append(time.perf_counter() - clock)
        if done.returncode != 0:
            raise SystemExit(f"{command} on s3://{moto.bucket}/{prefix} failed ({done.returncode}):\n"
                             f"{done.stderr[-3000:]}")
        return done.stdout.strip()

    clock = time.perf_counter()
    run("inject", str(seeds))
    for _ in range(rounds):
        segment = run("generate", "--top-n", str(top_n))
        if not segment:
            break
        run("fetch", segment)
        run("updatedb", segment)
        run("invertlinks", segment)
    return time.perf_counter() - clock, times


def spark_config(path: Path, cluster: Cluster, workers: int) -> Path:
    """A config file that runs the jobs on ``cluster`` (the driver on loopback, one shuffle partition a worker)."""
    path.write_text(
        "jobs:\n  engine: spark\nspark:\n"
        f"  master: {cluster.master_url}\n  conf:\n"
        "    spark.driver.host: 127.0.0.1\n    spark.driver.bindAddress: 127.0.0.1\n"
        '    spark.ui.enabled: "false"\n    spark.executor.memory: 512m\n'
        f'    spark.sql.shuffle.partitions: "{workers}"\n'
    )
    return path


def report(work: Path, results: dict[str, tuple[float, dict]], run: str, staging: Path | None = None) -> None:
    """Exit non-zero unless both engines' stores (mirrored to work/duckdb and work/spark) agree, and unless
    ``staging`` (a Spark run's ordinary staging copy) holds no database part; then print the figures."""
    duck, spark = outcome(work / "duckdb"), outcome(work / "spark")
    for table in duck:
        if duck[table] != spark[table]:
            raise SystemExit(f"the engines disagree on {table}: {len(duck[table])} vs {len(spark[table])} rows")
    summary = {"pages": len(duck["pages"]), "fetched": sum(r[1] == "fetched" for r in duck["pages"]),
               "links": len(duck["links"]), "inlinks": len(duck["inlinks"]), "same": True}
    if staging is not None:
        staged = [p for store in ("webdb", "linkdb") for p in (staging / store).rglob("*.parquet")]
        if staged:
            raise SystemExit(f"the Spark run's staging copy holds database parts: {staged[:3]}")
        summary["staged_database_parts"] = 0
    print(json.dumps(summary))
    print(f"| engine | {run} | " + " | ".join(JOBS) + " |")
    print("|---|---|" + "---|" * len(JOBS))
    for engine, (seconds, times) in results.items():
        cells = [" + ".join(f"{t:.1f}" for t in times.get(job, [])) + " s" for job in JOBS]
        print(f"| {engine} | {seconds:.1f} s | " + " | ".join(cells) + " |")


def webdb_jobs(cluster: Cluster, urls: int, folder: Path) -> None:
    """bench_webdb.py's updatedb, generate and invertlinks with the cluster as spark.master; prints its lines."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_webdb.py"), "--urls", str(urls), "--pages", str(urls // 10),
         "--engine", "spark", "--spark-master", cluster.master_url, "--memory-limit", "2GB", "--dir", str(folder)],
        capture_output=True, text=True, check=False, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    if done.returncode != 0:
        raise SystemExit(f"bench_webdb.py on the cluster failed:\n{done.stderr[-3000:]}")
    print(done.stdout, end="")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--pages", type=int, default=30, help="pages per host")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top-n", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="1g")
    parser.add_argument("--dir", default="/tmp/bench-spark-cluster")
    parser.add_argument("--keep", action="store_true", help="keep the folder afterwards")
    parser.add_argument("--webdb-urls", type=int, default=0,
                        help="also time bench_webdb.py's jobs at this many URLs (a tenth fetched) on the cluster")
    parser.add_argument("--s3", action="store_true", help="crawl step by step into s3:// on moto's server")
    args = parser.parse_args()

    work = Path(args.dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    port = free_port()
    seeds = work / "seeds.txt"
    seeds.write_text("".join(f"{url}\n" for url in generate(work / "web", args.hosts, args.pages, port, seed=7)))
    results: dict[str, tuple[float, dict]] = {}
    moto = Moto("bench-crawl")
    with Nginx(work / "web", port, work / "nginx"), contextlib.ExitStack() as stack:
        if args.s3:
            stack.enter_context(moto)
            results["DuckDB"] = s3_cycle(moto, "duckdb", work, seeds, args.rounds, args.top_n, None)
        else:
            results["DuckDB"] = crawl(work / "duckdb", seeds, args.rounds, args.top_n, None)
        with Cluster(work / "cluster", args.workers, args.worker_memory) as cluster:
            config = spark_config(work / "spark.yaml", cluster, args.workers)
            label = f"Spark standalone, {args.workers} workers" + (", s3://" if args.s3 else "")
            if args.s3:
                results[label] = s3_cycle(moto, "spark", work, seeds, args.rounds, args.top_n, config)
            else:
                results[label] = crawl(work / "spark", seeds, args.rounds, args.top_n, config)
            if args.webdb_urls:
                webdb_jobs(cluster, args.webdb_urls, work / "webdb")
        if args.s3:
            for name in ("duckdb", "spark"):
                moto.mirror(name, work / name)
    report(work, results, "crawl")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
