"""bench/realweb.py's web (mirrored trees, the generated hosts' extras) and bench/proctree.py's sampler."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import realweb  # noqa: E402
from proctree import TreeSampler  # noqa: E402
from realsites import Site  # noqa: E402


@pytest.mark.parametrize(("urls", "expected"), [
    ([], []),
    (["http://a/1", "http://a/2", "http://b/1"], ["http://a/1", "http://b/1", "http://a/2"]),
    (["http://a/1", "http://a/2", "http://a/3", "http://b:81/1", "http://c/1", "http://c/2"],
     ["http://a/1", "http://b:81/1", "http://c/1", "http://a/2", "http://c/2", "http://a/3"]),
])
def test_interleaved_takes_one_url_of_each_host_in_turn(urls, expected):
    assert realweb.interleaved(urls) == expected


def test_mirror_links_the_tree_and_adds_gzip_and_robots_without_touching_it(tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "index.html").write_text("<html><a href=sub/a.html>a</a></html>")
    (tree / "sub" / "a.html").write_text("<html>a</html>")
    (tree / "robots.txt").write_text("theirs\n")  # a file of the tree itself: must stay as it was
    monkeypatch.setattr(realweb, "WORK", tmp_path / "work")
    out = realweb.mirror(Site("t", "pkg-doc", "html", "/sub/"), tree)
    assert gzip.decompress((out / "sub" / "a.html.gz").read_bytes()) == b"<html>a</html>"
    assert (out / "index.html").stat().st_ino == (tree / "index.html").stat().st_ino
    assert (out / "robots.txt").read_text() == "User-agent: *\nDisallow: /sub/\n"
    assert (tree / "robots.txt").read_text() == "theirs\n"
    assert sorted(p.name for p in tree.rglob("*")) == ["a.html", "index.html", "robots.txt", "sub"]
    assert realweb.mirror(Site("t", "pkg-doc", "html", "/sub/"), tree) == out  # stamped: not rebuilt


def test_generated_hosts_get_crawl_delay_hosts_slow_pages_errors_and_a_trap(tmp_path):
    seeds = realweb.synthetic(tmp_path / "web", 6, 3, 18999, 7)
    web = tmp_path / "web"
    assert [f"http://{h}:18999/" for h in realweb.DELAYED] == seeds[-2:]
    for host in realweb.DELAYED:
        assert "Crawl-delay: 1" in (web / host / "robots.txt").read_text()
        assert len(list((web / host / "p").glob("*.html"))) == realweb.DELAYED_PAGES
    index = (web / "127.0.1.6" / "index.html").read_text()  # host 5: slow pages and an error
    assert all(link in index for link in ('href="/slow/0.html"', 'href="/slow/1.html"', 'href="/error/0.html"'))
    assert len((web / "127.0.1.6" / "slow" / "0.html").read_bytes()) > 16_000  # ~2 s at 8 kB/s
    assert 'href="next/"' in (web / "127.0.1.4" / "trap" / "index.html").read_text()  # host 3: the trap
    assert 'href="/trap/"' in (web / "127.0.1.4" / "index.html").read_text()
    assert not (web / "127.0.1.1" / "slow").exists()


HOLDER = """
import os, sys
block = bytearray(40 * 2**20)  # touched: resident
if os.fork() == 0:
    child = bytearray(40 * 2**20)
    print("ready", flush=True)
    sys.stdin.read()
    os._exit(0)
sys.stdin.read()
os.wait()
"""


def test_tree_sampler_sums_the_rss_of_every_process_below_the_root():
    launcher = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:])",
                                 sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert launcher.stdout.readline() == "ready\n"
        sampler = TreeSampler(launcher.pid)
        total = sampler.sample()
    finally:
        launcher.stdin.close()
        launcher.wait(10)
    assert sampler.peak_processes == 2  # the holder and its fork; the launcher left out
    assert total >= 80 * 2**20
    assert sampler.peak_bytes == total


def test_realsites_only_takes_sites_and_groups():
    import realsites

    assert realsites.chosen("core") == [s.name for s in realsites.SITES]
    assert realsites.chosen("django,apache") == ["django", "apache"]
    assert realsites.chosen("all") == [s.name for s in realsites.KNOWN] and len(realsites.KNOWN) == 15
    with pytest.raises(SystemExit, match="unknown site"):
        realsites.chosen("more,nosuch")


def test_realsites_counts_the_daemons_requests_site_by_site():
    """The daemon crawls every site at once: a site's requests, Disallow hits and pages are those to its address."""
    import realsites

    def row(addr, path, status=200, ctype="text/html", host=None):
        return {"t": 0.0, "addr": addr, "host": host or addr, "method": "GET", "path": path, "status": status,
                "type": ctype, "agent": "crawler/0.1"}

    class Log:
        def requests_since(self, offset):
            return [row("127.0.10.1", "/a.html"), row("127.0.10.1", "/private/x.html", 404),
                    row("127.0.10.2", "/private/y.html"), row("127.0.10.2", "/b.html", host="elsewhere")]

    site = Site("one", "pkg", "html", "/private/")
    run = realsites.Run("daemon", 1.0, 0.0, 0.0, 0.0)
    realsites.observe(Log(), run, 0, "127.0.10.1", site, "crawler/", one_site=True)
    assert (run.requests, run.html, run.disallowed, run.foreign_hosts) == (2, ["/a.html"], ["/private/x.html"], {})
    other = realsites.Run("daemon", 1.0, 0.0, 0.0, 0.0)
    realsites.observe(Log(), other, 0, "127.0.10.2", site, "crawler/", one_site=True)
    assert other.html == ["/b.html", "/private/y.html"] and other.foreign_hosts == {"elsewhere": 1}


def test_realsites_pairs_each_crawl_of_every_site_with_wgets_run_of_the_same_minutes():
    """Run i of every site at once is measured against wget's run i (its sites' pages over their summed walls),
    not against a median from another hour."""
    import realsites

    def run(wall, pages):
        return realsites.Run("x", wall, 0.0, 0.0, 0.0, html=[f"/{n}" for n in range(pages)])

    sites = [Site("a", "pkg", "html", "/p/"), Site("b", "pkg", "html", "/p/")]
    every = {"a": {"wget": [run(2.0, 10), run(4.0, 10)]}, "b": {"wget": [run(3.0, 20), run(6.0, 20)]}}
    at_once = [(2.0, 0.0, {"a": run(2.0, 10), "b": run(2.0, 20)}), (4.0, 0.0, {"a": run(4.0, 10), "b": run(4.0, 20)})]
    # run 0: 30 pages in 2 s against wget's 30 in 5 s; run 1: 30 in 4 s against 30 in 10 s
    assert realsites.paired(every, at_once, sites) == "Paired with wget's run of the same minutes: 2.50x, 2.50x (median **2.50x**)."


def test_realweb_pairs_each_crawler_run_with_the_other_contenders_run_of_the_same_minutes():
    """Run i against run i: a slow hour for one contender is not set against another hour of the other."""
    def run(pages, wall):
        return realweb.WebRun("x", wall, 0.0, 0.0, pages)

    crawler = [run(900, 1.0), run(800, 1.0), run(1000, 1.0)]
    floor = [run(1000, 1.0), run(1000, 1.0), run(1250, 1.0)]
    assert realweb.paired(crawler, floor) == "0.90, 0.80, 0.80 (median 0.80)"
    assert realweb.paired(crawler, []) == "no pair"
