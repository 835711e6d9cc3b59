"""Whole crawls over HTTPS with a private CA, and through a forwarding proxy on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.devserver import SiteServer
from tests.conftest import DEMO_SITE, ONE_LEVEL_A_ROUND, run_crawler
from tests.proxies import HttpProxy
from tests.tlscerts import make_ca


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]

PIN = "http.resolve={site.test: 127.0.0.1}"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_variables(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def ca(tmp_path):
    return make_ca(tmp_path)


async def _crawl(tmp_path: Path, seed: str, crawl_args, *extra: str, rounds: int = 6):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(seed + "\n")
    result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", str(rounds), *crawl_args, *extra)
    assert result.code == 0, result.stderr[-2000:]
    return result


async def _fetched_paths(crawl_args) -> list[str]:
    dump = await run_crawler("readdb", "--dump", "--format", "jsonl", *crawl_args)
    assert dump.code == 0, dump.stderr
    rows = [json.loads(line) for line in dump.stdout.splitlines()]
    return sorted(urlsplit(r["url"]).path or "/" for r in rows if r["status"] == "fetched")


class TestHttpsCrawl:
    async def test_private_ca_in_ca_file_fetches_every_page_into_valid_warcs(self, tmp_path, ca, crawl_args,
                                                                             expected_demo):
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("site.test")) as site:
            result = await _crawl(tmp_path, f"https://site.test:{site.port}/", crawl_args, "-D", PIN,
                                  "-D", f"http.tls.ca_file={ca.ca_file}")
        assert await _fetched_paths(crawl_args) == expected_demo["reachable"]
        assert set(ca.sni) == {"site.test"}
        warcs = sorted(Path(tmp_path).glob("segments/*/content/*.warc.gz"))
        assert warcs
        check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", *map(str, warcs)],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
        assert "digest pass" in check.stdout and "digest fail" not in check.stdout
        targets = set()
        for warc in warcs:
            with open(warc, "rb") as fh:
                for record in ArchiveIterator(fh):
                    if record.rec_type == "response":
                        targets.add(record.rec_headers.get_header("WARC-Target-URI"))
                        assert record.rec_headers.get_header("WARC-IP-Address") == "127.0.0.1"
        assert len(targets) > 30 and all(t.startswith(f"https://site.test:{site.port}/") for t in targets)
        assert not [e for e in result.events() if e["event"] == "http.tls.verify_off"]

    async def test_without_ca_file_every_row_names_the_certificate(self, tmp_path, ca, crawl_args):
        """robots.txt fails on the certificate: the rows, and robots.outcome, say so in OpenSSL's words."""
        async with SiteServer(DEMO_SITE, ssl_context=ca.server("site.test")) as site:
            result = await _crawl(tmp_path, f"https://site.test:{site.port}/", crawl_args, "-D", PIN, rounds=1)
        assert site.requests == []  # not one HTTP request: the handshake failed first
        reason = "robots.txt unreachable: tls: certificate verify failed: unable to get local issuer certificate"
        segment = result.stdout.split()[0]
        rows = duckdb.connect().execute(f"SELECT status, reason FROM '{segment}/fetcher/*.parquet'").fetchall()
        assert rows == [("retry", reason)]
        outcomes = [e for e in result.events() if e["event"] == "robots.outcome"]
        assert [(e["reason"], e["outcome"]) for e in outcomes] == [(reason, "disallow_all")]

    async def test_verify_off_fetches_a_self_signed_site_and_warns(self, tmp_path, ca, crawl_args, expected_demo):
        async with SiteServer(DEMO_SITE, ssl_context=ca.self_signed(tmp_path)) as site:
            result = await _crawl(tmp_path, f"https://site.test:{site.port}/", crawl_args, "-D", PIN,
                                  "-D", "http.tls.verify=false")
        assert await _fetched_paths(crawl_args) == expected_demo["reachable"]
        assert [e for e in result.events() if e["event"] == "http.tls.verify_off"]


class TestProxyCrawl:
    async def test_every_page_goes_through_the_proxy_and_politeness_holds(self, tmp_path, crawl_args,
                                                                        expected_demo):
        """The crawler's own pin for site.test leads nowhere: every page it got came through the proxy,
        whose log matches the server's, request for request; robots.txt once, /private/ never."""
        async with SiteServer(DEMO_SITE) as site, HttpProxy(resolve={"site.test": "127.0.0.1"}) as proxy:
            base = f"http://site.test:{site.port}"
            await _crawl(tmp_path, base + "/", crawl_args, "-D", "http.resolve={site.test: 127.0.0.9}",
                         "-D", f"http.proxy={proxy.url}")
        assert await _fetched_paths(crawl_args) == expected_demo["reachable"]
        assert [target for _method, target in proxy.log] == [base + p for p in site.paths()]
        assert all(method == "GET" for method, _ in proxy.log)
        assert site.paths().count("/robots.txt") == 1
        assert not [p for p in site.paths() if p.startswith("/private/")]
        assert site.max_in_flight == 1

    async def test_min_delay_holds_through_the_proxy(self, tmp_path, crawl_args, expected_demo):
        async with SiteServer(DEMO_SITE) as site, HttpProxy(resolve={"site.test": "127.0.0.1"}) as proxy:
            seeds = tmp_path / "seeds.txt"
            seeds.write_text("".join(f"http://site.test:{site.port}{p}\n" for p in expected_demo["reachable"][:8]))
            result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "1", *crawl_args,
                                       "-D", "http.resolve={site.test: 127.0.0.9}", "-D", f"http.proxy={proxy.url}",
                                       "-D", "fetcher.min_delay=0.2")
        assert result.code == 0, result.stderr[-2000:]
        requests = sorted(site.requests, key=lambda r: r.started)
        assert len(requests) == 9 and len(proxy.log) == 9
        gaps = [b.started - a.started for a, b in zip(requests, requests[1:], strict=False)
                if a.path_qs != "/robots.txt"]
        assert min(gaps) >= 0.2 - 0.05  # the proxy's hop adds a little jitter to each start
