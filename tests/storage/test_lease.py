"""The writer lease on object storage: refused while held, taken over when expired, safe against a killed writer."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest
import structlog

from crawler.config import StorageConfig
from crawler.crawldir import Remote
from crawler.errors import LeaseHeld, WebDbError
from crawler.storage.bucket import Bucket
from crawler.storage.lease import Lease
from tests.conftest import run_crawler
from tests.procs import kill_child
from tests.storage.conftest import keys, read, staging_args


def _lease(s3_endpoint: str, bucket: str, ttl: float = 60.0) -> Lease:
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint))
    return Lease(store, "crawl/webdb/.lock", ttl, structlog.get_logger())


def _plant_lease(s3, bucket: str, owner: str, expires: float) -> None:
    s3.put_object(Bucket=bucket, Key="crawl/webdb/.lock", Body=json.dumps({"owner": owner, "expires": expires}))


async def _inject(tmp_path, site_url: str, args: list[str]):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(site_url + "\n")
    return await run_crawler("inject", str(seeds), *args)


async def test_second_writer_refused_while_lease_held(tmp_path, s3, bucket, s3_endpoint, s3_args):
    """While a live lease is held, a writer fails at once naming the holder, and nothing is published."""
    holder = _lease(s3_endpoint, bucket)
    holder.acquire()
    try:
        result = await _inject(tmp_path, "http://127.0.0.1:9/", s3_args)
    finally:
        holder.release()
    assert result.code == 1
    assert "webdb/.lock: locked by another job" in result.stderr
    assert ":" in result.stderr.split("locked by another job (")[1]  # host:pid of the holder
    assert keys(s3, bucket, "crawl/webdb/") == []  # no CURRENT, no version; and the released lease is gone


async def test_conditional_put_refuses_second_lease(s3, bucket, s3_endpoint):
    """moto honours If-None-Match: of two leases on one key only the first is acquired."""
    first, second = _lease(s3_endpoint, bucket), _lease(s3_endpoint, bucket)
    first.acquire()
    try:
        with pytest.raises(LeaseHeld, match="locked by another job"):
            second.acquire()
    finally:
        first.release()
    assert keys(s3, bucket, "crawl/webdb/.lock") == []


async def test_racing_takeover_of_expired_lease(s3, bucket, s3_endpoint):
    """Two writers that both read an expired lease: the If-Match takeover lets exactly one win."""
    _plant_lease(s3, bucket, "dead-host:1", time.time() - 5)
    first, second = _lease(s3_endpoint, bucket), _lease(s3_endpoint, bucket)
    stale = first.bucket.get(first.key)
    first.acquire()
    try:
        # The loser's takeover was conditional on the ETag it read before the winner's.
        assert second.bucket.put_if_match(second.key, b"{}", stale.etag) is None
        assert first.taken_over == {"owner": "dead-host:1", "expires": pytest.approx(time.time() - 5, abs=60)}
    finally:
        first.release()


async def test_lease_renewed_and_loss_detected(s3, bucket, s3_endpoint):
    """The renewal thread moves the lease's expiry on; once someone else replaces it, verify() refuses to publish."""
    lease = _lease(s3_endpoint, bucket, ttl=0.6)
    lease.acquire()
    try:
        first = json.loads(read(s3, bucket, "crawl/webdb/.lock"))["expires"]
        deadline = time.monotonic() + 20
        while json.loads(read(s3, bucket, "crawl/webdb/.lock"))["expires"] == first:
            assert time.monotonic() < deadline, "lease never renewed"
            await asyncio.sleep(0.05)
        lease.verify()
        _plant_lease(s3, bucket, "thief:2", time.time() + 60)
        with pytest.raises(WebDbError, match="lease was lost"):
            lease.verify()
    finally:
        lease.release()
    assert json.loads(read(s3, bucket, "crawl/webdb/.lock"))["owner"] == "thief:2"  # not ours to delete


async def test_dead_writer_lease_and_half_version_taken_over(tmp_path, s3, bucket, s3_args):
    """A writer that died mid-publish left an expired lease and a half v000001: the next writer replaces both."""
    _plant_lease(s3, bucket, "dead-host:1", time.time() - 1)
    s3.put_object(Bucket=bucket, Key="crawl/webdb/v000001/meta.json", Body=b"half")
    s3.put_object(Bucket=bucket, Key="crawl/webdb/v000001/pages/stray.parquet", Body=b"half")
    result = await _inject(tmp_path, "http://127.0.0.1:9/", s3_args)
    assert result.code == 0, result.stderr[-2000:]
    takeovers = [e for e in result.events() if e.get("event") == "storage.lease_taken_over"]
    assert takeovers and takeovers[0]["previous_owner"] == "dead-host:1"
    assert read(s3, bucket, "crawl/webdb/CURRENT").strip() == "v000001"
    assert json.loads(read(s3, bucket, "crawl/webdb/v000001/meta.json"))["version"] == 1
    assert "crawl/webdb/v000001/pages/stray.parquet" not in keys(s3, bucket)
    assert keys(s3, bucket, "crawl/webdb/.lock") == []


async def test_killed_job_leaves_current_on_previous_version(tmp_path, s3, bucket, s3_endpoint, s3_args):
    """A crawl killed with SIGKILL mid-fetch publishes nothing: CURRENT stays on the complete v000001 and reads work."""
    reached = asyncio.Event()

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.set()  # the crawl is fetching: it has pulled, leased and generated
        await reader.read()
        writer.close()

    hanging = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = hanging.sockets[0].getsockname()[1]
    try:
        assert (r := await _inject(tmp_path, f"http://127.0.0.1:{port}/", s3_args)).code == 0, r.stderr[-2000:]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawler", "crawl", "--rounds", "1", *s3_args,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            await asyncio.wait_for(reached.wait(), 60)
        finally:
            kill_child(proc)
            await proc.wait()
    finally:
        hanging.close()
    assert read(s3, bucket, "crawl/webdb/CURRENT").strip() == "v000001"
    assert keys(s3, bucket, "crawl/segments/") == []
    assert json.loads(read(s3, bucket, "crawl/webdb/.lock"))["expires"] > time.time()  # left to expire
    stats = await run_crawler("readdb", "--stats", "--json", *staging_args(tmp_path / "staging-b", s3_endpoint, bucket))
    assert stats.code == 0, stats.stderr[-2000:]
    assert json.loads(stats.stdout)["version"] == 1
