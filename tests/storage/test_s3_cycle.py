"""The Nutch cycle on crawl_dir=s3://bucket/prefix against moto's S3 server: what lands in the bucket."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from crawler.segments.layout import Segment, partition_of
from crawler.webdb.store import VersionedStore
from tests.conftest import run_crawler
from tests.storage.conftest import keys, read, staging_args

HOSTS = ["a.test", "b.test", "c.test", "e.test"]  # two per partition of 2


def _check_live_version(s3, bucket: str, store: str, *tables: str) -> str:
    """CURRENT names a version whose meta.json and every table's parts are in the bucket; returns its name."""
    name = read(s3, bucket, f"crawl/{store}/CURRENT").strip()
    listed = keys(s3, bucket, f"crawl/{store}/{name}/")
    assert f"crawl/{store}/{name}/meta.json" in listed
    for table in tables:
        assert any(k.startswith(f"crawl/{store}/{name}/{table}/") and k.endswith(".parquet") for k in listed), listed
    return name


def _fetched(path: Path) -> dict[str, str]:
    return {r["url"]: r["status"] for part in Segment(path).parts("fetcher") for r in pq.read_table(part).to_pylist()}


def _webdb(crawl_path: Path) -> dict[str, str]:
    version = VersionedStore(crawl_path / "webdb").require_current()
    return {r["url"]: r["status"] for r in pq.read_table(version.path / "pages").to_pylist()}


def _check_segment_complete(s3, bucket: str, name: str) -> None:
    listed = keys(s3, bucket, f"crawl/segments/{name}/")
    for output in ("fetchlist", "fetcher"):
        assert f"crawl/segments/{name}/{output}/_SUCCESS" in listed, listed
        assert any(k.startswith(f"crawl/segments/{name}/{output}/part-") for k in listed)


async def test_step_by_step_across_three_machines(tmp_path, demo_site, s3, bucket, s3_endpoint):
    """inject and generate on A, fetch partitions on A and B at once, updatedb and invertlinks on C: as one process."""
    assert {partition_of(h, 2) for h in HOSTS} == {0, 1}
    port = demo_site.base_url.rsplit(":", 1)[1]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://{h}:{port}/\nhttp://{h}:{port}/about/\n" for h in HOSTS))
    resolve = "{" + ", ".join(f"{h}: 127.0.0.1" for h in HOSTS) + "}"
    # Each machine has a staging copy of its own: only the bucket links them.
    a, b, c = ([*staging_args(tmp_path / m, s3_endpoint, bucket), "-D", f"http.resolve={resolve}"]
               for m in ("staging-a", "staging-b", "staging-c"))
    assert (r := await run_crawler("inject", str(seeds), *a)).code == 0, r.stderr[-2000:]
    assert _check_live_version(s3, bucket, "webdb", "pages") == "v000001"
    assert keys(s3, bucket, "crawl/webdb/.lock") == []  # released
    generated = await run_crawler("generate", "--partitions", "2", *a)
    assert generated.code == 0, generated.stderr[-2000:]
    name = generated.stdout.strip().rsplit("/", 1)[-1]
    assert f"crawl/segments/{name}/fetchlist/_SUCCESS" in keys(s3, bucket, "crawl/segments/")
    # The one-process baseline: A's staging copy as it is now, fetched and merged as a local crawl_dir.
    whole_dir = tmp_path / "whole"
    shutil.copytree(tmp_path / "staging-a" / "s3" / bucket / "crawl", whole_dir)
    local = [*a, "-D", f"crawl_dir={whole_dir}"]

    # Neither machine sees the other's _done marker locally; the one that lists both after publishing marks the outputs.
    fetches = await asyncio.gather(run_crawler("fetch", name, "--partition", "0", *a),
                                   run_crawler("fetch", name, "--partition", "1", *b),
                                   run_crawler("fetch", str(whole_dir / "segments" / name), *local))
    assert [f.code for f in fetches] == [0, 0, 0], [f.stderr[-1000:] for f in fetches]
    _check_segment_complete(s3, bucket, name)
    listed = keys(s3, bucket, f"crawl/segments/{name}/")
    for marker in ("fetcher/_done-00000", "fetcher/_done-00001", "content/_SUCCESS", "parse_data/_SUCCESS"):
        assert f"crawl/segments/{name}/{marker}" in listed

    merged = await asyncio.gather(run_crawler("updatedb", name, *c),
                                  run_crawler("updatedb", str(whole_dir / "segments" / name), *local))
    assert [m.code for m in merged] == [0, 0], [m.stderr[-1000:] for m in merged]
    third = tmp_path / "staging-c" / "s3" / bucket / "crawl"
    whole = _fetched(whole_dir / "segments" / name)
    assert len(whole) == 2 * len(HOSTS) and set(whole.values()) == {"success"}
    assert _fetched(third / "segments" / name) == whole
    assert _webdb(third) == _webdb(whole_dir)
    assert _check_live_version(s3, bucket, "webdb", "pages") == "v000002"
    assert json.loads(read(s3, bucket, "crawl/webdb/v000002/meta.json"))["merged_segments"] == [name]

    inverted = await run_crawler("invertlinks", name, *c)
    assert inverted.code == 0, inverted.stderr[-2000:]
    _check_live_version(s3, bucket, "linkdb")
    # Merged into both stores, the segment leaves C's staging copy (not the bucket).
    assert [e["segments"] for e in inverted.events() if e.get("event") == "storage.evicted"] == [[name]]
    assert not (third / "segments" / name).exists()
    _check_segment_complete(s3, bucket, name)


async def test_crawl_two_rounds(tmp_path, demo_site, s3, bucket, s3_args):
    """crawl --rounds 2 publishes each round: both segments complete, CURRENT names the version merging both."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(demo_site.url("/") + "\n")
    result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "2", *s3_args)
    assert result.code == 0, result.stderr[-2000:]
    names = [line.rsplit("/", 1)[-1] for line in result.stdout.split()]
    assert len(names) == 2
    published = [e for e in result.events() if e.get("event") == "storage.published"]
    assert len(published) >= 2  # after each round, not only at the end
    for name in names:
        _check_segment_complete(s3, bucket, name)
    version = _check_live_version(s3, bucket, "webdb", "pages")
    assert json.loads(read(s3, bucket, f"crawl/webdb/{version}/meta.json"))["merged_segments"][-2:] == names
    # Old versions are pruned to the live one and the one before.
    versions = {k.split("/")[2] for k in keys(s3, bucket, "crawl/webdb/v")}
    assert len(versions) == 2 and version in versions
    linkdb = _check_live_version(s3, bucket, "linkdb")
    assert json.loads(read(s3, bucket, f"crawl/linkdb/{linkdb}/meta.json"))["merged_segments"][-2:] == names


async def test_daemon_publishes_each_cycle(tmp_path, demo_site, s3, bucket, s3_args):
    """The daemon on s3:// publishes every cycle and its seed memory; keep_segments prunes the bucket too."""
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "a.txt").write_text(demo_site.url("/") + "\n")
    archive = tmp_path / "archive"
    result = await run_crawler("daemon", *s3_args, "-D", f"daemon.seeds={seeds}", "-D", "daemon.max_cycles=2",
                               "-D", "metrics.listen=", "-D", "daemon.idle_sleep=0.1",
                               "-D", "daemon.keep_segments=1", "-D", f"daemon.archive_dir={archive}")
    assert result.code == 0, result.stderr[-2000:]
    cycles = [e for e in result.events() if e.get("event") == "cycle.done"]
    assert len(cycles) == 2
    assert len([e for e in result.events() if e.get("event") == "storage.published"]) >= 2  # after each cycle, not only at exit
    assert read(s3, bucket, "crawl/webdb/CURRENT").strip() == f"v{cycles[-1]['version']:06d}"
    merged = json.loads(read(s3, bucket, f"crawl/webdb/v{cycles[-1]['version']:06d}/meta.json"))["merged_segments"]
    assert len(merged) == 2
    _check_segment_complete(s3, bucket, merged[-1])
    # The older merged segment went to the archive, whole, and left the bucket.
    pruned = [e["segments"] for e in result.events() if e.get("event") == "storage.segments_pruned"]
    assert pruned == [[merged[0]]]
    assert keys(s3, bucket, f"crawl/segments/{merged[0]}/") == []
    assert (archive / merged[0] / "fetcher" / "_SUCCESS").exists()
    assert "a.txt" in read(s3, bucket, "crawl/daemon-state.json")
