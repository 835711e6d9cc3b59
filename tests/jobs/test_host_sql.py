"""The per-outlink host test the link jobs use gives the regex's answer exactly, for any URL and host."""

from __future__ import annotations

import duckdb

from crawler.jobs.sql import host_differs_sql, host_sql
from crawler.urls.normalize import host_of

URLS = [
    "http://a.com/", "http://a.com", "http://a.com:8080/x", "https://a.com/x", "http://a.com.evil/x",
    "http://a.comx/", "http://b.a.com/", "http://xa.com/", "http://user@a.com/", "http://a.com@b.com/",
    "http://a.com:pw@b.com/x", "http://u:p@a.com:81/", "ftp://a.com/", "mailto:a.com", "a.com/x", "",
    "http://[::1]:80/", "http://[::1]/", "http://[::1/", "http://[a/b]", "http://a.com?q=http://a.com/",
    "http://a.com#f", "http://a.com?x", "http://x.org/?u=http://a.com/", "HTTP://a.com/", "http:///p",
    "http://:80/", "http://[a:1]/", "http://[ab/x", "https://a.com:/", "https://ü.de/a", "http://ü.de:1/", "http://127.0.1.1:18080/p/1.html",
]


def test_host_differs_matches_the_regex():
    """host_differs_sql(url, host) == (host_sql(url) <> host) for every URL against every host the regex gives."""
    con = duckdb.connect()
    hosts = sorted({row[0] for row in con.execute(f"SELECT {host_sql('u')} FROM unnest(?) t(u)", [URLS]).fetchall()})
    rows = con.execute(
        f"SELECT u, h, {host_differs_sql('u', 'h')}, {host_sql('u')} <> h FROM unnest(?) a(u), unnest(?) b(h)",
        [URLS, hosts],
    ).fetchall()
    assert len(rows) == len(URLS) * len(hosts) > 400
    assert [r for r in rows if r[2] != r[3]] == []
    assert sum(1 for r in rows if not r[2]) >= len(URLS)  # each URL is the same host as itself at least


def test_host_sql_is_host_of():
    """host_sql computes the host as crawler.urls.normalize.host_of does, for normalized URLs."""
    urls = ["http://a.com/", "http://a.com:8080/x", "https://u:p@b.org/", "http://[::1]:80/"]
    con = duckdb.connect()
    got = [r[0] for r in con.execute(f"SELECT {host_sql('u')} FROM unnest(?) WITH ORDINALITY t(u, i) ORDER BY i",
                                     [urls]).fetchall()]
    assert got == [host_of(u) for u in urls]
