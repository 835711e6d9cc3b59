"""`crawler crawl` or `crawler daemon` over s3:// with the jobs on a standalone Spark cluster, each step staged as its command.

Run: .venv/bin/python bench/bench_spark_s3.py [--command crawl|daemon] [--hosts 4] [--pages 10] [--rounds 2]
                                              [--workers 2] [--dir /tmp/bench-spark-s3] [--keep]

Reuses bench_spark_cluster.py's pieces: a generated multi-host web served by
nginx on 127.0.1.N, moto's S3 server on 127.0.0.1, and a Spark master with
``--workers`` workers started from the pyspark package (their environment has
no AWS credentials: the executors get the driver's in the task closure). Runs
the command once into ``s3://bench-spark-s3/duckdb`` with the jobs on DuckDB and
once into ``s3://bench-spark-s3/spark`` with the jobs on the cluster (the
``crawler`` process is the driver): ``crawl --seeds --rounds N``, or the daemon
with ``daemon.max_cycles`` N and ``daemon.overlap`` off, so that both runs cut
the same segments. Exits non-zero if the two runs' webdb and linkdb differ, or
if the Spark run's ordinary staging copy (where its fetches ran) holds any
webdb or linkdb Parquet. Prints each job's time (from the JSON log) and a
Markdown row per engine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_cluster import Cluster, Moto, free_port, job_times, report, spark_config  # noqa: E402
from nginx import Nginx  # noqa: E402
from sitegen import generate  # noqa: E402

BUCKET = "bench-spark-s3"


def command_args(command: str, seeds: Path, rounds: int) -> list[str]:
    """The command line of one run, past ``crawler COMMAND``: crawl's seeds and rounds, or the daemon's."""
    if command == "crawl":
        return ["--seeds", str(seeds / "seeds.txt"), "--rounds", str(rounds)]
    return ["-D", f"daemon.seeds={seeds}", "-D", f"daemon.max_cycles={rounds}", "-D", "daemon.overlap=false",
            "-D", "metrics.listen="]


def run_s3(command: str, moto: Moto, prefix: str, work: Path, seeds: Path, rounds: int,
           config: Path | None) -> tuple[float, dict]:
    args = [sys.executable, "-m", "crawler", command, *command_args(command, seeds, rounds),
            "-D", f"crawl_dir=s3://{moto.bucket}/{prefix}", "-D", f"storage.endpoint={moto.endpoint}",
            "-D", f"storage.staging_dir={work / 'staging' / prefix}", "-D", "http.allow_private_networks=true",
            "-D", "fetcher.min_delay=0", "-D", "fetcher.concurrency=32", "-D", "log.format=json"]
    if config is not None:
        args[3:3] = ["-c", str(config)]
    started = datetime.now(UTC).replace(tzinfo=None)
    clock = time.perf_counter()
    done = subprocess.run(args, cwd=work, capture_output=True, text=True, check=False,
                          env={**os.environ, **Moto.CREDENTIALS, "SPARK_LOCAL_IP": "127.0.0.1"})
    seconds = time.perf_counter() - clock
    if done.returncode != 0:
        raise SystemExit(f"{command} into s3://{moto.bucket}/{prefix} failed ({done.returncode}):\n"
                         f"{done.stderr[-3000:]}")
    return seconds, job_times(done.stderr, started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--command", choices=("crawl", "daemon"), default="crawl")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--pages", type=int, default=10, help="pages per host")
    parser.add_argument("--rounds", type=int, default=2, help="crawl's rounds, or the daemon's max_cycles")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="1g")
    parser.add_argument("--dir", default="/tmp/bench-spark-s3")
    parser.add_argument("--keep", action="store_true", help="keep the folder afterwards")
    args = parser.parse_args()

    work = Path(args.dir)
    shutil.rmtree(work, ignore_errors=True)
    seeds = work / "seeds"
    seeds.mkdir(parents=True)
    port = free_port()
    urls = generate(work / "web", args.hosts, args.pages, port, seed=7)
    (seeds / "seeds.txt").write_text("".join(f"{url}\n" for url in urls))
    results: dict[str, tuple[float, dict]] = {}
    with Nginx(work / "web", port, work / "nginx"), Moto(BUCKET) as moto:
        results["DuckDB, s3://"] = run_s3(args.command, moto, "duckdb", work, seeds, args.rounds, None)
        with Cluster(work / "cluster", args.workers, args.worker_memory) as cluster:
            config = spark_config(work / "spark.yaml", cluster, args.workers)
            label = f"Spark standalone, {args.workers} workers, s3://"
            results[label] = run_s3(args.command, moto, "spark", work, seeds, args.rounds, config)
        for name in ("duckdb", "spark"):
            moto.mirror(name, work / name)
    run = "crawl" if args.command == "crawl" else "daemon run"
    report(work, results, run, staging=work / "staging" / "spark" / "s3" / BUCKET / "spark")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
