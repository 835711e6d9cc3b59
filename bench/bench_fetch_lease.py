"""Time what fetching a partition of an s3:// segment adds: its lease, its pull, and dropping it from staging.

Run: .venv/bin/python bench/bench_fetch_lease.py [--partitions 16] [--commits 8]

Starts moto's S3 server on 127.0.0.1 (objects in its memory: this measures our
request path on loopback, not a real store). Publishes a synthetic fetched
segment of --partitions partitions (--commits parts of 64 KB per partition and
output, as bench_s3_staging.py builds it), then times: the two narrow listings
a lease starts with (fetchlist parts, `_done` markers) against one listing of
the whole segment, leasing one partition and
releasing it (listing, conditional PUT, listing again, conditional DELETE),
leasing every partition at once, pulling what `fetch --partition I` pulls (the
fetchlist and partition I's files) against pulling the whole segment, and
evicting the whole segment from a staging copy. One JSON line each.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_s3_staging import CREDENTIALS, _moto, _segment_copy, _timed  # noqa: E402

from crawler.config import StorageConfig  # noqa: E402
from crawler.crawldir import Remote  # noqa: E402
from crawler.storage.bucket import Bucket  # noqa: E402
from crawler.storage.partition_lease import PartitionLeases  # noqa: E402
from crawler.storage.segments import SegmentSync  # noqa: E402

NAME = "20261130T000000000Z"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--commits", type=int, default=8)
    opts = parser.parse_args()
    os.environ.update(CREDENTIALS)
    proc, endpoint = _moto()
    log = structlog.get_logger()
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        bucket = Bucket(Remote("s3", "bench", "crawl"), StorageConfig(endpoint=endpoint))
        with tempfile.TemporaryDirectory(prefix="bench-lease-") as tmp:
            work = Path(tmp)
            # A fetched segment, all partitions done, as the bucket holds it.
            _segment_copy(work / "writer", NAME, opts.partitions, range(opts.partitions), opts.commits)
            SegmentSync(bucket, work / "writer").publish()
            objects = len(bucket.list(f"crawl/segments/{NAME}"))
            for p in range(opts.partitions):  # not done: a fetch of it would lease it
                bucket.delete([f"crawl/segments/{NAME}/fetcher/_done-{p:05d}"])
            sync = SegmentSync(bucket, work / "reader")

            def lease_each() -> None:
                for p in range(opts.partitions):
                    leases = PartitionLeases(sync, NAME, 60.0, log)
                    assert leases.acquire([p]) == [p]
                    leases.release()

            def lease_all() -> None:
                leases = PartitionLeases(sync, NAME, 60.0, log)
                assert len(leases.acquire(None)) == opts.partitions
                leases.release()

            _timed("the two narrow listings a lease starts with", lambda: sync.fetch_partitions(NAME))
            _timed("one listing of the whole segment, for comparison",
                   lambda: bucket.list(f"crawl/segments/{NAME}"), objects=objects)
            row = _timed(f"lease + release one partition, x{opts.partitions}", lease_each, objects=objects)
            print(f'{{"step": "per partition", "seconds": {row["seconds"] / opts.partitions:.4f}}}', flush=True)
            _timed(f"lease + release all {opts.partitions} partitions in one command", lease_all)
            _timed("pull for fetch --partition 0 (fetchlist + its files)",
                   lambda: SegmentSync(bucket, work / "one").pull([NAME], partitions=[0]))
            whole = SegmentSync(bucket, work / "whole")
            _timed("pull the whole segment (what updatedb pulls again after an eviction)",
                   lambda: whole.pull([NAME]), objects=objects)
            _timed("evict the whole segment from staging", lambda: whole.evict([NAME]))
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
