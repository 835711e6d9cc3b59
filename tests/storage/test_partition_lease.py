"""The fetch lease of a segment partition on s3://: one machine fetches it; a dead one's lease is taken over."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from crawler.segments.layout import partition_of
from tests.conftest import run_crawler
from tests.procs import kill_child
from tests.storage.conftest import keys, read, staging_args

HOSTS = ["a.test", "b.test", "c.test", "e.test"]  # two per partition of 2
PAGES = ["/", "/about/", "/contact.html", "/privacy.html"]


async def make_segment(tmp_path: Path, demo_site, endpoint: str, bucket: str) -> tuple[str, str]:
    """Inject and generate a 2-partition segment into s3://BUCKET/crawl from staging A; (segment name, resolve)."""
    assert {partition_of(h, 2) for h in HOSTS} == {0, 1}
    port = demo_site.base_url.rsplit(":", 1)[1]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://{h}:{port}{page}\n" for h in HOSTS for page in PAGES))
    resolve = "{" + ", ".join(f"{h}: 127.0.0.1" for h in HOSTS) + "}"
    a = [*staging_args(tmp_path / "staging-a", endpoint, bucket), "-D", f"http.resolve={resolve}"]
    assert (r := await run_crawler("inject", str(seeds), *a)).code == 0, r.stderr[-2000:]
    generated = await run_crawler("generate", "--partitions", "2", *a)
    assert generated.code == 0, generated.stderr[-2000:]
    return generated.stdout.strip().rsplit("/", 1)[-1], resolve


def bucket_rows(s3, bucket: str, name: str, tmp_path: Path) -> list[tuple[str, str]]:
    """Every (url, status) row of the segment's fetcher parts in the bucket."""
    rows = []
    for key in keys(s3, bucket, f"crawl/segments/{name}/fetcher/part-"):
        local = tmp_path / "rows" / key.rsplit("/", 1)[1]
        local.parent.mkdir(exist_ok=True)
        local.write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        rows += [(r["url"], r["status"]) for r in pq.read_table(local).to_pylist()]
    return rows


async def _wait_for(check, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_a_leased_partition_is_refused_then_taken_over_after_its_holder_died(
        tmp_path, demo_site, s3, bucket, s3_endpoint):
    """A second fetch of a leased partition fails naming segment, partition and holder; the crash is resumed later."""
    name, resolve = await make_segment(tmp_path, demo_site, s3_endpoint, bucket)
    a, b = ([*staging_args(tmp_path / m, s3_endpoint, bucket), "-D", f"http.resolve={resolve}"]
            for m in ("staging-a", "staging-b"))
    lease_key = f"crawl/segments/.leases/{name}/partition-00000"
    a_segment = tmp_path / "staging-a" / "s3" / bucket / "crawl" / "segments" / name
    demo_site.delay = 1.0  # A commits one page at a time
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", "fetch", name, "--partition", "0", *a,
        "-D", "storage.lease_ttl=5", "-D", "fetcher.commit_records=1",
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        await _wait_for(lambda: keys(s3, bucket, lease_key) == [lease_key], "A's lease")
        await _wait_for(lambda: any((a_segment / "fetcher").glob("part-00000-*.parquet")), "A's first commit")
        demo_site.delay = 8.0  # and is caught mid-fetch: its next pages take long
        refused = await run_crawler("fetch", name, "--partition", "0", *b)
        assert refused.code == 1
        lease = json.loads(read(s3, bucket, lease_key))
        expected = f"segment {name}, partition 0: being fetched by {lease['owner']} (lease s3://{bucket}/{lease_key} until"
        assert expected in refused.stderr, refused.stderr[-2000:]
        assert not (tmp_path / "staging-b").exists()  # nothing pulled
    finally:
        kill_child(holder)
        await holder.wait()
    demo_site.delay = 0.0

    # The holder died: its lease stays until it expires (5 s), then a rerun on A's machine takes over and resumes.
    expires = json.loads(read(s3, bucket, lease_key))["expires"]
    await asyncio.sleep(max(0.0, expires - time.time()) + 0.2)
    resumed = await run_crawler("fetch", name, "--partition", "0", *a)
    assert resumed.code == 0, resumed.stderr[-2000:]
    events = [json.loads(line) for line in resumed.stderr.splitlines() if line.startswith("{")]
    assert any(e["event"] == "storage.partition_taken_over" and e["partition"] == 0 for e in events)
    assert any(e["event"] == "fetch.resume" and e["committed"] >= 1 for e in events)
    assert keys(s3, bucket, f"crawl/segments/.leases/{name}/") == []  # released
    assert f"crawl/segments/{name}/fetcher/_done-00000" in keys(s3, bucket, f"crawl/segments/{name}/")

    # The whole segment from B: partition 0 is done in the bucket, so only partition 1 is leased and fetched.
    rest = await run_crawler("fetch", name, *b)
    assert rest.code == 0, rest.stderr[-2000:]
    events = [json.loads(line) for line in rest.stderr.splitlines() if line.startswith("{")]
    assert [e["partitions"] for e in events if e["event"] == "storage.partitions_done"] == [[0]]
    assert [e["partitions"] for e in events if e["event"] == "fetch.start"] == [[1]]
    assert f"crawl/segments/{name}/fetcher/_SUCCESS" in keys(s3, bucket, f"crawl/segments/{name}/")
    rows = bucket_rows(s3, bucket, name, tmp_path)
    assert len(rows) == len(set(rows)) == len(PAGES) * len(HOSTS)  # each URL once: nothing fetched twice
    assert {status for _, status in rows} == {"success"}
