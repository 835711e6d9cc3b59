"""Time what a remote crawl_dir (s3://) adds: publishing and pulling a webdb version, and a whole small crawl.

Run: .venv/bin/python bench/bench_s3_staging.py [--urls 2000000] [--parts 4] [--rounds 2]

Starts moto's S3 server on 127.0.0.1 (a real HTTP server; objects held in its
memory, so it measures our transfer path and HTTP, not a real object store's
bandwidth). Builds a synthetic webdb version of --urls pages with DuckDB, then
times: publish (claim, upload every part, conditional PUT of CURRENT), pull into
an empty staging copy, and pull again into the warm copy (only CURRENT and
meta.json travel). Then a synthetic segment of --partitions fetch partitions
(--commits parts of 64 KB per partition and output) is published as two machines
would after `fetch --partition`: half the partitions from one staging copy, half
from another (whose publish finds every `_done` marker and writes `_SUCCESS`),
and the listing-only completion check and the remote prune (markers first) are
timed. Then runs `crawler crawl --rounds N` on the demo site into a local
crawl_dir and into s3://, and reports both wall times. One JSON line each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
import duckdb
import structlog

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawler.config import StorageConfig  # noqa: E402
from crawler.crawldir import Remote  # noqa: E402
from crawler.devserver import SiteServer  # noqa: E402
from crawler.storage.bucket import Bucket  # noqa: E402
from crawler.storage.segments import SegmentSync  # noqa: E402
from crawler.storage.stores import StoreSync  # noqa: E402

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1"}


def _moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}"


def _version(root: Path, urls: int, parts: int) -> int:
    version = root / "webdb" / "v000001"
    (version / "pages").mkdir(parents=True)
    con = duckdb.connect()
    for part in range(parts):
        n = urls // parts
        con.execute(f"""COPY (SELECT 'https://host' || (i % 10000) || '.example/page/' || i AS url,
                              'host' || (i % 10000) || '.example' AS host, 'fetched' AS status,
                              now() AS fetch_time, md5(i::VARCHAR) AS digest, random() AS score
                       FROM range({part * n}, {(part + 1) * n}) t(i))
                       TO '{version}/pages/part-{part:05d}.parquet' (FORMAT parquet)""")
    (version / "meta.json").write_text(json.dumps({"version": 1, "merged_segments": []}))
    (root / "webdb" / "CURRENT").write_text("v000001\n")
    return sum(p.stat().st_size for p in (version / "pages").iterdir())


def _timed(label: str, func, **extra) -> dict:
    t0 = time.monotonic()
    func()
    row = {"step": label, "seconds": round(time.monotonic() - t0, 3), **extra}
    print(json.dumps(row), flush=True)
    return row


def _segment_copy(staging: Path, name: str, partitions: int, mine: range, commits: int) -> None:
    """A staging copy that fetched the partitions in ``mine``: the whole fetchlist, its own parts and _done markers."""
    seg = staging / "segments" / name
    for output in ("fetchlist", "fetcher", "content", "parse_text", "parse_data"):
        (seg / output).mkdir(parents=True)
    for p in range(partitions):
        (seg / "fetchlist" / f"part-{p:05d}.parquet").write_bytes(os.urandom(65536))
    (seg / "fetchlist" / "_SUCCESS").write_bytes(b"")
    for p in mine:
        for output in ("fetcher", "content", "parse_text", "parse_data"):
            for c in range(commits):
                (seg / output / f"part-{p:05d}-{c:05d}.parquet").write_bytes(os.urandom(65536))
        (seg / "fetcher" / f"_done-{p:05d}").write_bytes(b"")


def _segments(work: Path, bucket: Bucket, partitions: int, commits: int) -> None:
    name = "20261130T000000000Z"
    half = partitions // 2
    _segment_copy(work / "seg-a", name, partitions, range(half), commits)
    _segment_copy(work / "seg-b", name, partitions, range(half, partitions), commits)
    objects = partitions + 1 + partitions * (4 * commits + 1) + 4
    a, b = SegmentSync(bucket, work / "seg-a"), SegmentSync(bucket, work / "seg-b")
    _timed("publish partitions 0..N/2 (copy A; not complete yet)", a.publish, partitions=partitions)
    _timed("publish partitions N/2..N (copy B; completes the segment)", b.publish, objects=objects)
    _timed("completion check alone (one listing)", lambda: a._finish_partitioned_fetch(work / "seg-a" / "segments" / name))
    _timed("remote prune of the segment (markers first)", lambda: a.delete([name]), objects=objects)


async def _crawl(args: list[str], seeds: Path) -> float:
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "crawler", "crawl", "--seeds", str(seeds),
                                                *args, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode:
        raise SystemExit(err.decode()[-2000:])
    return time.monotonic() - t0


async def _crawls(work: Path, endpoint: str, bucket: str, rounds: int) -> None:
    async with SiteServer(ROOT / "examples" / "site", "127.0.0.1", 0) as site:
        seeds = work / "seeds.txt"
        seeds.write_text(site.url("/") + "\n")
        common = ["--rounds", str(rounds), "-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0",
                  "-D", "log.format=json"]
        local = await _crawl([*common, "-D", f"crawl_dir={work / 'local'}"], seeds)
        remote = await _crawl([*common, "-D", f"crawl_dir=s3://{bucket}/demo", "-D", f"storage.endpoint={endpoint}",
                               "-D", f"storage.staging_dir={work / 'crawl-staging'}"], seeds)
    print(json.dumps({"step": f"crawl --rounds {rounds} (demo site)", "local_s": round(local, 2),
                      "s3_s": round(remote, 2), "ratio": round(remote / local, 2)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--urls", type=int, default=2_000_000)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--commits", type=int, default=8)
    opts = parser.parse_args()
    os.environ.update(CREDENTIALS)
    proc, endpoint = _moto()
    work = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    try:
        print(json.dumps({"load_average": os.getloadavg()}), flush=True)
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        bucket = Bucket(Remote("s3", "bench", "crawl"), StorageConfig(endpoint=endpoint))
        size = _version(work / "a", opts.urls, opts.parts)
        mb = round(size / 1e6, 1)
        row = _timed("publish version", lambda: StoreSync(bucket, work / "a", "webdb").publish(lambda: None),
                     urls=opts.urls, mb=mb)
        print(json.dumps({"publish_mb_per_s": round(mb / row["seconds"], 1)}))
        row = _timed("pull into empty staging", lambda: StoreSync(bucket, work / "b", "webdb").pull(False), mb=mb)
        print(json.dumps({"pull_mb_per_s": round(mb / row["seconds"], 1)}))
        _timed("pull into warm staging", lambda: StoreSync(bucket, work / "b", "webdb").pull(False))
        _segments(work, bucket, opts.partitions, opts.commits)
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
        asyncio.run(_crawls(work, endpoint, "bench", opts.rounds))
        print(json.dumps({"load_average": os.getloadavg()}), flush=True)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
