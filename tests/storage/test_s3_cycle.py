"""The Nutch cycle on crawl_dir=s3://bucket/prefix against moto's S3 server: what lands in the bucket."""

from __future__ import annotations

import json

from tests.conftest import run_crawler
from tests.storage.conftest import keys, read, staging_args


def _check_live_version(s3, bucket: str, store: str, *tables: str) -> str:
    """CURRENT names a version whose meta.json and every table's parts are in the bucket; returns its name."""
    name = read(s3, bucket, f"crawl/{store}/CURRENT").strip()
    listed = keys(s3, bucket, f"crawl/{store}/{name}/")
    assert f"crawl/{store}/{name}/meta.json" in listed
    for table in tables:
        assert any(k.startswith(f"crawl/{store}/{name}/{table}/") and k.endswith(".parquet") for k in listed), listed
    return name


def _check_segment_complete(s3, bucket: str, name: str) -> None:
    listed = keys(s3, bucket, f"crawl/segments/{name}/")
    for output in ("fetchlist", "fetcher"):
        assert f"crawl/segments/{name}/{output}/_SUCCESS" in listed
        assert any(k.startswith(f"crawl/segments/{name}/{output}/part-") for k in listed)


async def test_step_by_step_cycle(tmp_path, demo_site, s3, bucket, s3_endpoint, s3_args):
    """inject, generate, fetch, updatedb, invertlinks each publish to the bucket; another staging copy reads it back."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(demo_site.url("/") + "\n")
    assert (r := await run_crawler("inject", str(seeds), *s3_args)).code == 0, r.stderr[-2000:]
    assert _check_live_version(s3, bucket, "webdb", "pages") == "v000001"
    assert keys(s3, bucket, "crawl/webdb/.lock") == []  # released
    generated = await run_crawler("generate", *s3_args)
    assert generated.code == 0, generated.stderr[-2000:]
    name = generated.stdout.strip().rsplit("/", 1)[-1]
    assert f"crawl/segments/{name}/fetchlist/_SUCCESS" in keys(s3, bucket, "crawl/segments/")
    # Each later step runs from a staging copy of its own, as on another machine: only the bucket links them.
    other = staging_args(tmp_path / "staging-b", s3_endpoint, bucket)
    for command in (["fetch", name], ["updatedb", name], ["invertlinks", name]):
        result = await run_crawler(*command, *other)
        assert result.code == 0, f"{command}: {result.stderr[-2000:]}"
    _check_segment_complete(s3, bucket, name)
    assert _check_live_version(s3, bucket, "webdb", "pages") == "v000002"
    assert json.loads(read(s3, bucket, "crawl/webdb/v000002/meta.json"))["merged_segments"] == [name]
    _check_live_version(s3, bucket, "linkdb")
    stats = await run_crawler("readdb", "--stats", "--json", *staging_args(tmp_path / "staging-c", s3_endpoint, bucket))
    assert stats.code == 0, stats.stderr[-2000:]
    figures = json.loads(stats.stdout)
    assert figures["version"] == 2
    assert figures["by_status"].get("fetched", 0) >= 1


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
    """The daemon on s3:// publishes every cycle's segment and version, and its seed memory, then exits 0."""
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "a.txt").write_text(demo_site.url("/") + "\n")
    result = await run_crawler("daemon", *s3_args, "-D", f"daemon.seeds={seeds}", "-D", "daemon.max_cycles=2",
                               "-D", "metrics.listen=", "-D", "daemon.idle_sleep=0.1")
    assert result.code == 0, result.stderr[-2000:]
    cycles = [e for e in result.events() if e.get("event") == "cycle.done"]
    assert len(cycles) == 2
    assert len([e for e in result.events() if e.get("event") == "storage.published"]) >= 2  # after each cycle, not only at exit
    assert read(s3, bucket, "crawl/webdb/CURRENT").strip() == f"v{cycles[-1]['version']:06d}"
    merged = json.loads(read(s3, bucket, f"crawl/webdb/v{cycles[-1]['version']:06d}/meta.json"))["merged_segments"]
    for name in merged:
        _check_segment_complete(s3, bucket, name)
    assert "a.txt" in read(s3, bucket, "crawl/daemon-state.json")
