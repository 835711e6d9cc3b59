"""The project's static-site server: real HTTP on loopback, as every crawler test uses it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest
from multidict import CIMultiDict
from yarl import URL

from crawler.devserver import SiteServer
from tests.procs import kill_child, signal_child

REPO = Path(__file__).resolve().parent.parent
DEMO_SITE = REPO / "examples" / "site"
SECRET = "SECRET-MARKER-7f3a"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "sub").mkdir(parents=True)
    (root / "index.html").write_text("<html><head><title>Home</title></head><body>home</body></html>")
    (root / "sub" / "index.html").write_text("<title>Sub</title>sub index")
    (root / "sub" / "page.html").write_text("<title>Page</title>page")
    (root / "style.css").write_text("body { color: black }")
    (root / "_redirects").write_text(
        "# comment line\n"
        "/old.html /sub/page.html 301\n"
        "/moved /sub/ 302  # trailing comment\n"
        "/away http://127.0.0.9:1/elsewhere 307\n"
    )
    # Files next to the root that traversal attempts go after.
    (tmp_path / "pyproject.toml").write_text(SECRET)
    (root / "escape").symlink_to(tmp_path / "pyproject.toml")
    return root


async def fetch(session: aiohttp.ClientSession, url: str | URL, **kw) -> tuple[int, CIMultiDict, str]:
    async with session.get(url, allow_redirects=False, **kw) as resp:
        return resp.status, resp.headers.copy(), await resp.text(errors="replace")


async def test_serves_index_as_utf8_html(site: Path) -> None:
    """GET / answers index.html with 'text/html; charset=utf-8'."""
    async with SiteServer(site) as srv, aiohttp.ClientSession() as s:
        assert srv.base_url == f"http://127.0.0.1:{srv.port}" and srv.port > 0
        status, headers, body = await fetch(s, srv.base_url + "/")
        assert status == 200
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert "<title>Home</title>" in body
        status, headers, _ = await fetch(s, srv.base_url + "/style.css")
        assert (status, headers["Content-Type"]) == (200, "text/css")


async def test_directory_serves_its_index_and_slashless_url_redirects(site: Path) -> None:
    """'/sub/' serves sub/index.html; '/sub' is a 301 to '/sub/' as on real servers."""
    async with SiteServer(site) as srv, aiohttp.ClientSession() as s:
        status, _, body = await fetch(s, srv.base_url + "/sub/")
        assert status == 200 and "sub index" in body
        status, headers, _ = await fetch(s, srv.base_url + "/sub")
        assert (status, headers["Location"]) == (301, "/sub/")


async def test_missing_file_is_404_with_html_body(site: Path) -> None:
    """A missing page answers 404 with a small HTML body."""
    async with SiteServer(site) as srv, aiohttp.ClientSession() as s:
        status, headers, body = await fetch(s, srv.base_url + "/nope.html")
        assert status == 404
        assert headers["Content-Type"].startswith("text/html")
        assert "Not Found" in body


async def test_redirects_come_from_the_redirects_file(site: Path) -> None:
    """Each _redirects line answers its status and Location; the file itself is not served."""
    async with SiteServer(site) as srv, aiohttp.ClientSession() as s:
        status, headers, _ = await fetch(s, srv.base_url + "/old.html")
        assert (status, headers["Location"]) == (301, "/sub/page.html")
        status, headers, _ = await fetch(s, srv.base_url + "/moved")
        assert (status, headers["Location"]) == (302, "/sub/")
        status, headers, _ = await fetch(s, srv.base_url + "/away")
        assert (status, headers["Location"]) == (307, "http://127.0.0.9:1/elsewhere")
        status, _, body = await fetch(s, srv.base_url + "/_redirects")
        assert status == 404 and "/old.html" not in body


@pytest.mark.parametrize(
    "raw_path",
    [
        "/../pyproject.toml",
        "/sub/../../pyproject.toml",
        "/%2e%2e/pyproject.toml",
        "/%2E%2E%2Fpyproject.toml",
        "/..%2fpyproject.toml",
        "/sub/%2e%2e/%2e%2e/pyproject.toml",
        "/%2e%2e%5cpyproject.toml",
        "/escape",
    ],
)
async def test_never_serves_outside_root(site: Path, raw_path: str) -> None:
    """Dot-dot paths, percent-encoded or not, and symlinks out of root never reach the file."""
    async with SiteServer(site) as srv, aiohttp.ClientSession() as s:
        status, _, body = await fetch(s, URL(srv.base_url + raw_path, encoded=True))
        assert status in (400, 404)
        assert SECRET not in body
        # The path really went out as written (the client did not tidy it up first).
        assert srv.requests[-1].path_qs == raw_path


async def test_absolute_filesystem_paths_are_not_served(site: Path) -> None:
    """'//abs/path' and '/%2Fabs/path' stay inside root."""
    secret = site.parent / "pyproject.toml"
    async with SiteServer(site) as srv, aiohttp.ClientSession() as s:
        for raw in (f"/{secret}", f"/%2F{str(secret).lstrip('/')}"):
            status, _, body = await fetch(s, URL(srv.base_url + raw, encoded=True))
            assert status in (400, 404) and SECRET not in body


async def test_request_log_records_each_request(site: Path) -> None:
    """Every request is logged with path and query, method, status and User-Agent."""
    async with SiteServer(site) as srv, aiohttp.ClientSession(headers={"User-Agent": "TestBot/1.0"}) as s:
        await fetch(s, srv.base_url + "/?q=1")
        await fetch(s, srv.base_url + "/missing.html")
        async with s.head(srv.base_url + "/sub/page.html") as resp:
            assert resp.status == 200
        async with s.post(srv.base_url + "/") as resp:
            assert resp.status == 405
    got = [(r.path_qs, r.method, r.status, r.user_agent) for r in srv.requests]
    assert got == [
        ("/?q=1", "GET", 200, "TestBot/1.0"),
        ("/missing.html", "GET", 404, "TestBot/1.0"),
        ("/sub/page.html", "HEAD", 200, "TestBot/1.0"),
        ("/", "POST", 405, "TestBot/1.0"),
    ]
    assert all(r.started <= r.finished for r in srv.requests)


async def test_max_in_flight_counts_concurrent_requests(site: Path) -> None:
    """Three simultaneous requests to a slow server are seen in flight together."""
    async with SiteServer(site, delay=0.2) as srv, aiohttp.ClientSession() as s:
        results = await asyncio.gather(*(fetch(s, srv.base_url + f"/?n={i}") for i in range(3)))
        assert [status for status, _, _ in results] == [200, 200, 200]
        assert srv.max_in_flight == 3
        assert srv.in_flight == 0


async def test_one_request_at_a_time_keeps_max_in_flight_at_one(site: Path) -> None:
    """Sequential requests never overlap, so max_in_flight stays 1."""
    async with SiteServer(site, delay=0.05) as srv, aiohttp.ClientSession() as s:
        for i in range(3):
            await fetch(s, srv.base_url + f"/?n={i}")
        assert srv.max_in_flight == 1


async def test_two_servers_on_distinct_loopback_addresses(site: Path, tmp_path: Path) -> None:
    """Servers on 127.0.0.1 and 127.0.0.2 run at once, each serving and logging its own site."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "index.html").write_text("<title>Other host</title>")
    async with (
        SiteServer(site, "127.0.0.1") as a,
        SiteServer(other, "127.0.0.2") as b,
        aiohttp.ClientSession() as s,
    ):
        assert b.base_url.startswith("http://127.0.0.2:")
        (_, _, body_a), (_, _, body_b) = await asyncio.gather(fetch(s, a.url("/")), fetch(s, b.url("/")))
        assert "Home" in body_a and "Other host" in body_b
        assert [r.path_qs for r in a.requests] == ["/"]
        assert [r.path_qs for r in b.requests] == ["/"]


async def test_conditional_get_answers_304(site: Path) -> None:
    """A matching If-None-Match or a fresh If-Modified-Since gets 304 with no body."""
    async with SiteServer(site) as srv, aiohttp.ClientSession() as s:
        status, headers, _ = await fetch(s, srv.url("/sub/page.html"))
        assert status == 200 and headers["ETag"] and headers["Last-Modified"]
        status, _, body = await fetch(
            s, srv.url("/sub/page.html"), headers={"If-None-Match": headers["ETag"]}
        )
        assert (status, body) == (304, "")
        ims = {"If-Modified-Since": headers["Last-Modified"]}
        assert (await fetch(s, srv.url("/sub/page.html"), headers=ims))[0] == 304
        assert (await fetch(s, srv.url("/sub/page.html"), headers={"If-None-Match": '"other"'}))[0] == 200


async def test_malformed_redirects_file_fails_at_start(tmp_path: Path) -> None:
    """A bad _redirects line is reported when the server starts, naming the line."""
    (tmp_path / "_redirects").write_text("/a /b 301\n/c /d 200\n")
    srv = SiteServer(tmp_path)
    with pytest.raises(ValueError, match="line 2"):
        await srv.start()
    await srv.stop()


async def test_cli_writes_port_file_and_exits_zero_on_sigterm(site: Path, tmp_path: Path) -> None:
    """The CLI picks a port, writes --port-file, serves, and exits 0 on SIGTERM with nothing on stdout."""
    port_file = tmp_path / "port"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler.devserver", "--root", str(site), "--port", "0",
        "--port-file", str(port_file),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        for _ in range(400):  # bounded wait for startup, not a timing assertion
            if port_file.exists() or proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        port = int(port_file.read_text())
        async with aiohttp.ClientSession() as s:
            status, _, body = await fetch(s, f"http://127.0.0.1:{port}/")
        assert status == 200 and "Home" in body
        signal_child(proc, signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            kill_child(proc)
            await proc.wait()
    assert proc.returncode == 0
    assert stdout == b""
    assert f"127.0.0.1:{port}" in stderr.decode()
    assert not port_file.exists() and not os.path.exists(f"{port_file}.tmp")


async def test_demo_site_answers_as_expected_demo_json_says() -> None:
    """examples/site and tests/sites/expected_demo.json agree: 200s, redirects, 404s, robots.txt."""
    expected = json.loads((REPO / "tests" / "sites" / "expected_demo.json").read_text())
    async with SiteServer(DEMO_SITE) as srv, aiohttp.ClientSession() as s:
        for path in expected["reachable"] + expected["disallowed"]:
            status, headers, body = await fetch(s, srv.url(path))
            assert status == 200, path
            assert "<title>" in body and headers["Content-Type"] == "text/html; charset=utf-8"
        for source, (target, code) in expected["redirects"].items():
            status, headers, _ = await fetch(s, srv.url(source))
            assert (status, headers["Location"]) == (code, target)
        for path in expected["missing"]:
            assert (await fetch(s, srv.url(path)))[0] == 404
        status, headers, body = await fetch(s, srv.url("/robots.txt"))
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        assert "User-agent: *\nDisallow: /private/\n" in body
