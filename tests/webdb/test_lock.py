"""One writer at a time, and no half-written state: the webdb lock and killed jobs, with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from crawler.config import CrawlerConfig
from crawler.jobs.readdb import db_stats
from crawler.jobs.readlinkdb import inlinks_of
from crawler.webdb.store import VersionedStore
from tests.conftest import run_crawler
from tests.jobs.conftest import fetch, page, parse, read_pages, write_db

ROOT = Path(__file__).resolve().parents[2]
URL, OTHER = "http://a.example/", "http://b.example/"

# Takes the webdb lock, starts a version (leaving a temp folder), says so, then waits to be killed.
HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from crawler.webdb.store import VersionedStore
    store = VersionedStore(Path(sys.argv[1]) / "webdb")
    with store.lock(), store.new_version({}) as temp:
        (temp / "pages").mkdir()
        print("holding", flush=True)
        time.sleep(120)
""")

# Runs a job whose first Parquet output is written, then says so and waits to be killed halfway.
KILLED_JOB = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import structlog
    import crawler.jobs.engine as engine
    from crawler.config import CrawlerConfig
    from crawler.segments.layout import Segment

    job_name, crawl_dir, segment = sys.argv[1:4]
    write = engine.DuckEngine.write
    def write_then_wait(*args, **kwargs):
        rows = write(*args, **kwargs)
        print("written", flush=True)
        time.sleep(120)
        return rows
    module = __import__(f"crawler.jobs.{job_name}", fromlist=[job_name])
    engine.DuckEngine.write = write_then_wait
    cfg = CrawlerConfig(crawl_dir=crawl_dir, linkdb={"ignore_internal": False})
    getattr(module, job_name)(cfg, [Segment(Path(segment))], structlog.get_logger())
""")


def start(script: str, *args: str) -> subprocess.Popen:
    """Start ``script`` and wait for its first line, which says it reached the point to be killed at."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail(f"helper process ended early: {proc.stderr.read()[-2000:]}")
    return proc


def crawler(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args, "-D", "log.format=json"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()


@pytest.fixture
def seeds(tmp_path: Path) -> Path:
    path = tmp_path / "seeds.txt"
    path.write_text(f"{OTHER}\n")
    return path


def test_live_lock_makes_a_second_writer_exit_with_a_clear_message(cfg, seeds):
    """While a job holds the webdb lock, inject exits 1 with one line naming the lock holder's pid."""
    write_db(cfg, [page(URL)])
    holder = start(HOLDER, str(cfg.crawl_path))
    try:
        result = crawler("inject", str(seeds), "-D", f"crawl_dir={cfg.crawl_path}")
    finally:
        kill(holder)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"crawler: {cfg.crawl_path / 'webdb'}: locked by another job (pid {holder.pid}); "
        "wait for it to finish or stop it, then run again"
    )
    assert list(read_pages(cfg)) == [URL]


def test_stale_lock_from_a_killed_process_is_recovered(cfg, seeds):
    """After the holder is SIGKILLed, the lock file still names it, yet the next writer runs and removes its debris."""
    write_db(cfg, [page(URL)])
    holder = start(HOLDER, str(cfg.crawl_path))
    kill(holder)
    webdb = cfg.crawl_path / "webdb"
    assert (webdb / ".lock").read_text() == str(holder.pid)
    assert [p for p in webdb.iterdir() if p.name.startswith(".tmp-")]
    result = crawler("inject", str(seeds), "-D", f"crawl_dir={cfg.crawl_path}")
    assert result.returncode == 0, result.stderr
    assert sorted(read_pages(cfg)) == [URL, OTHER]
    assert not [p for p in webdb.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.parametrize("job", ["updatedb", "invertlinks"])
def test_job_killed_halfway_leaves_the_previous_version_live(cfg, make_segment, job):
    """A job SIGKILLed after writing part of its next version leaves the old one live and readable; a rerun works."""
    write_db(cfg, [page(URL)])
    seg = make_segment("20260101T010000000Z", [fetch(URL)], [parse(URL, [(OTHER, "b")])])
    store_dir = cfg.crawl_path / ("webdb" if job == "updatedb" else "linkdb")
    if job == "invertlinks":
        done = crawler("invertlinks", str(seg.path), "-D", f"crawl_dir={cfg.crawl_path}",
                       "-D", "linkdb.ignore_internal=false")
        assert done.returncode == 0, done.stderr
        seg = make_segment("20260101T020000000Z", [fetch(URL)], [parse(URL, [(OTHER, "new anchor")])])
    before = (store_dir / "CURRENT").read_text()
    proc = start(KILLED_JOB, job, str(cfg.crawl_path), str(seg.path))
    kill(proc)
    assert (store_dir / "CURRENT").read_text() == before
    assert [p for p in store_dir.iterdir() if p.name.startswith(".tmp-")]
    if job == "updatedb":
        assert db_stats(cfg)["version"] == 1 and read_pages(cfg)[URL]["status"] == "unfetched"
    else:
        assert inlinks_of(CrawlerConfig(crawl_dir=str(cfg.crawl_path)), OTHER)["inlinks"][0]["anchor"] == "b"

    rerun = crawler(job, str(seg.path), "-D", f"crawl_dir={cfg.crawl_path}", "-D", "linkdb.ignore_internal=false")
    assert rerun.returncode == 0, rerun.stderr
    assert (store_dir / "CURRENT").read_text() != before
    assert not [p for p in store_dir.iterdir() if p.name.startswith(".tmp-")]
    if job == "invertlinks":
        assert inlinks_of(CrawlerConfig(crawl_dir=str(cfg.crawl_path)), OTHER)["inlinks"][0]["anchor"] == "new anchor"


async def test_crawl_resumes_a_segment_merged_but_not_inverted(demo_site, crawl_args, tmp_path):
    """invertlinks SIGKILLed after updatedb merged the segment: the next crawl inverts it before anything else."""
    args = [*crawl_args, "-D", "linkdb.ignore_internal=false"]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{demo_site.url('/')}\n")
    assert (await run_crawler("inject", str(seeds), *args)).code == 0
    generated = await run_crawler("generate", *args)
    segment = generated.stdout.strip()
    for step in ("fetch", "updatedb"):
        done = await run_crawler(step, segment, *args)
        assert done.code == 0, done.stderr[-2000:]
    kill(start(KILLED_JOB, "invertlinks", str(tmp_path), segment))
    assert not (tmp_path / "linkdb" / "CURRENT").exists()

    resumed = await run_crawler("crawl", "--rounds", "0", *args)
    assert resumed.code == 0, resumed.stderr[-2000:]
    cfg = CrawlerConfig(crawl_dir=str(tmp_path))
    linkdb = VersionedStore(tmp_path / "linkdb").require_current()
    assert linkdb.merged_segments == [Path(segment).name]
    webdb = VersionedStore(tmp_path / "webdb").require_current()
    links = {(r["to_url"], r["from_url"]) for r in pq.read_table(webdb.path / "links").to_pylist()}
    inlinks = {(r["to_url"], r["from_url"]) for r in pq.read_table(linkdb.path / "inlinks").to_pylist()}
    assert inlinks == {(t, f) for t, f in links if t != f} and inlinks
    to_url, from_url = min(inlinks)
    assert from_url in [i["from_url"] for i in inlinks_of(cfg, to_url)["inlinks"]]
