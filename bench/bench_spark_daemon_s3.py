"""`crawler daemon` over s3:// with the jobs on a standalone Spark cluster: each step staged as its own command.

Run: .venv/bin/python bench/bench_spark_daemon_s3.py [--hosts 4] [--pages 10] [--cycles 2] [--workers 2]
                                                     [--dir /tmp/bench-spark-daemon-s3] [--keep]

bench_spark_crawl_s3.py with the daemon instead of ``crawl``: the same
generated web (nginx on 127.0.1.N), moto's S3 server, and a standalone master
with ``--workers`` workers whose environment has no AWS credentials. One
``crawler daemon`` with ``daemon.max_cycles`` N into ``s3://bench-daemon/duckdb``
with the jobs on DuckDB, one into ``s3://bench-daemon/spark`` with the jobs on
the cluster (the daemon is the driver). ``daemon.overlap`` is off so that both
runs cut the same segments. Exits non-zero if the two webdbs and linkdbs differ,
or if the Spark daemon's ordinary staging copy (where its fetches ran) holds any
webdb or linkdb Parquet. Prints each job's time (from the daemon's JSON log).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_cluster import JOBS, Cluster, Moto, free_port, job_times, outcome  # noqa: E402
from nginx import Nginx  # noqa: E402
from sitegen import generate  # noqa: E402


def daemon_s3(moto: Moto, prefix: str, work: Path, seeds: Path, cycles: int,
              config: Path | None) -> tuple[float, dict]:
    args = [sys.executable, "-m", "crawler", "daemon",
            "-D", f"crawl_dir=s3://{moto.bucket}/{prefix}", "-D", f"storage.endpoint={moto.endpoint}",
            "-D", f"storage.staging_dir={work / 'staging' / prefix}", "-D", "http.allow_private_networks=true",
            "-D", f"daemon.seeds={seeds}", "-D", f"daemon.max_cycles={cycles}", "-D", "daemon.overlap=false",
            "-D", "metrics.listen=", "-D", "fetcher.min_delay=0", "-D", "fetcher.concurrency=32",
            "-D", "log.format=json"]
    if config is not None:
        args[3:3] = ["-c", str(config)]
    started = datetime.now(UTC).replace(tzinfo=None)
    clock = time.perf_counter()
    done = subprocess.run(args, cwd=work, capture_output=True, text=True, check=False,
                          env={**os.environ, **Moto.CREDENTIALS, "SPARK_LOCAL_IP": "127.0.0.1"})
    seconds = time.perf_counter() - clock
    if done.returncode != 0:
        raise SystemExit(f"daemon on s3://{moto.bucket}/{prefix} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, job_times(done.stderr, started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--pages", type=int, default=10, help="pages per host")
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="1g")
    parser.add_argument("--dir", default="/tmp/bench-spark-daemon-s3")
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
    with Nginx(work / "web", port, work / "nginx"), Moto("bench-daemon") as moto:
        results["DuckDB, s3://"] = daemon_s3(moto, "duckdb", work, seeds, args.cycles, None)
        with Cluster(work / "cluster", args.workers, args.worker_memory) as cluster:
            config = work / "spark.yaml"
            config.write_text(
                "jobs:\n  engine: spark\nspark:\n"
                f"  master: {cluster.master_url}\n  conf:\n"
                "    spark.driver.host: 127.0.0.1\n    spark.driver.bindAddress: 127.0.0.1\n"
                '    spark.ui.enabled: "false"\n    spark.executor.memory: 512m\n'
                f'    spark.sql.shuffle.partitions: "{args.workers}"\n'
            )
            label = f"Spark standalone, {args.workers} workers, s3://"
            results[label] = daemon_s3(moto, "spark", work, seeds, args.cycles, config)
        for name in ("duckdb", "spark"):
            moto.mirror(name, work / name)
    duck, spark = outcome(work / "duckdb"), outcome(work / "spark")
    for table in duck:
        if duck[table] != spark[table]:
            raise SystemExit(f"the engines disagree on {table}: {len(duck[table])} vs {len(spark[table])} rows")
    ordinary = work / "staging" / "spark" / "s3" / "bench-daemon" / "spark"
    staged = [p for store in ("webdb", "linkdb") for p in (ordinary / store).rglob("*.parquet")]
    if staged:
        raise SystemExit(f"the Spark daemon's staging copy holds database parts: {staged[:3]}")
    print(json.dumps({"pages": len(duck["pages"]), "fetched": sum(r[1] == "fetched" for r in duck["pages"]),
                      "links": len(duck["links"]), "inlinks": len(duck["inlinks"]), "same": True,
                      "staged_database_parts": 0}))
    print("| engine | daemon run | " + " | ".join(JOBS) + " |")
    print("|---|---|" + "---|" * len(JOBS))
    for engine, (seconds, times) in results.items():
        cells = [" + ".join(f"{t:.1f}" for t in times.get(job, [])) + " s" for job in JOBS]
        print(f"| {engine} | {seconds:.1f} s | " + " | ".join(cells) + " |")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
