"""The robots cache's origin of a URL, sliced on the fast path, is what urlsplit gives."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from crawler.fetcher.robots import origin_of

CASES = [
    "http://a.example/x", "http://a.example", "http://a.example?q=1", "http://a.example#f",
    "http://a.example:8080/x?y#z", "https://user:pw@h.example:8443/p", "http://a.example/x?u=http://c.d/",
    "http://a.example?x#y/z", "http://a.example#/x", "http://127.0.1.7:18080/p/1.html",
    "HTTP://A.example/x", "http://[::1]:80/x", "ftp://h.example/x", " http://a.example/x",
    "http://a.example/x ", "http://a.exa\tmple/x", "http://bücher.example/x", "http:///x",
]


@pytest.mark.parametrize("url", CASES)
def test_origin_matches_urlsplit(url):
    """Scheme and netloc as urlsplit gives them, for plain URLs and odd ones alike."""
    parts = urlsplit(url)
    assert origin_of(url) == f"{parts.scheme}://{parts.netloc}"
