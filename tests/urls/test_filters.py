from __future__ import annotations

import duckdb
import pytest

from crawler.config import UrlsConfig, load_config
from crawler.errors import ConfigError
from crawler.urls.filters import UrlFilters, check_sql_patterns, filter_sql

RULES = [r"-\.(gif|jpe?g|png)$", r"-^https?://[^/]*bad\.example/", r"+^https?://([a-z0-9-]+\.)*good\.example/", r"+/keep/"]
CFG = UrlsConfig(filters=RULES, max_length=60, schemes=["http", "https"])

# url -> None when kept, else a fragment of the reason
CASES = [
    ("http://good.example/", None),
    ("https://www.good.example/a/b?c=d", None),
    ("http://good.example/logo.png", "rule 1"),
    ("http://bad.example/keep/", "rule 2"),
    ("http://other.example/keep/x", None),
    ("http://other.example/", "no urls.filters rule matches"),
    ("http://good.example/" + "x" * 60, "urls.max_length"),
    ("ftp://good.example/", "scheme ftp"),
    ("mailto:someone@good.example", "scheme mailto"),
    # spider traps: a path segment more than urls.max_segment_repeats (3) times; the query does not count
    ("http://good.example/a/b/a/b/a/b/", None),
    ("http://good.example/a/b/a/b/a/b/a/", "urls.max_segment_repeats"),
    ("http://good.example/p//p//p//p", "urls.max_segment_repeats"),
    ("http://good.example/?q=/a/a/a/a", None),
    # the SQL skips counting below max_segment_repeats + 3 slashes: both sides of that line
    ("http://good.example/a/a/a", None),
    ("http://good.example/a/a/a/a", "urls.max_segment_repeats"),
]


@pytest.mark.parametrize(("url", "reason"), CASES)
def test_check(url, reason):
    """check answers None for a kept URL, else a reason naming the rule or setting that rejected it."""
    got = UrlFilters(CFG).check(url)
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got


@pytest.mark.parametrize(("url", "reason"), CASES)
def test_sql_agrees_with_check(url, reason):
    """The SQL rendering of the chain keeps exactly the URLs that check keeps."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT ?::VARCHAR AS url", [url])
    (kept,) = con.execute(f"SELECT {filter_sql(CFG, 'url')} FROM t").fetchone()
    assert kept == (reason is None)


def test_first_matching_rule_wins():
    """An accept rule before a reject rule for the same URL keeps it, and the other order drops it."""
    url = "http://a.example/x.pdf"
    assert UrlFilters(UrlsConfig(filters=[r"+a\.example", r"-\.pdf$"])).check(url) is None
    assert "rule 1" in UrlFilters(UrlsConfig(filters=[r"-\.pdf$", r"+a\.example"])).check(url)


def test_no_rules_accepts_every_allowed_url():
    """With the defaults (no rules) only the scheme and length limits apply."""
    filters = UrlFilters(UrlsConfig())
    assert filters.check("https://anything.example/at/all") is None
    assert filters.check("file:///etc/passwd") is not None


def test_external_redirects_when_ignoring_external_links():
    """With ignore_external, a URL on another host than its source is rejected; without a source it is kept."""
    filters = UrlFilters(UrlsConfig(), ignore_external=True)
    assert filters.check("http://a.example/2", source="http://a.example/1") is None
    assert "external" in filters.check("http://b.example/", source="http://a.example/1")
    assert filters.check("http://b.example/") is None


@pytest.mark.parametrize(
    ("rule", "needle"),
    [("*.pdf", "starts with + (accept) or - (reject)"), ("-([a-z", "not a valid regular expression")],
)
def test_bad_rules_are_config_errors(rule, needle):
    """A rule without +/- or with a broken regex stops the config load naming urls.filters and its index."""
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"urls.filters=['+ok', '{rule}']"])
    assert "urls.filters.1" in str(info.value) and needle in str(info.value)


def test_rule_the_sql_engine_cannot_run_is_named():
    """A look-ahead (valid in Python, not in RE2) is reported with its rule number before a job runs."""
    cfg = UrlsConfig(filters=["+ok", "-a(?=b)"])
    with pytest.raises(ConfigError, match=r"rule 2 \(-a\(\?=b\)\)"):
        check_sql_patterns(cfg, duckdb.connect())


DEPTH_CFG = UrlsConfig(max_path_depth=4, max_segment_repeats=0)
# url -> kept under urls.max_path_depth 4: non-empty path segments count, the query does not
DEPTH_CASES = [
    ("http://h.example", True),
    ("http://h.example/", True),
    ("http://h.example/a/b/c/d", True),
    ("http://h.example/a/b/c/d/", True),
    ("http://h.example/a/b/c/d.html?x=/1/2/3/4/5", True),
    ("http://h.example/a//b//c//d", True),  # many slashes, four segments: the SQL's slow path
    ("http://h.example/a/b/c/d/e", False),
    ("http://h.example/a/b/c/d/e/", False),
    ("https://u:p@h.example:8080/next/next/next/next/next/", False),
]


@pytest.mark.parametrize(("url", "kept"), DEPTH_CASES)
def test_max_path_depth(url, kept):
    """urls.max_path_depth rejects a URL with more path segments, in check and in SQL alike."""
    got = UrlFilters(DEPTH_CFG).check(url)
    assert (got is None) == kept
    if not kept:
        assert "urls.max_path_depth (4)" in got
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT ?::VARCHAR AS url", [url])
    assert con.execute(f"SELECT {filter_sql(DEPTH_CFG, 'url')} FROM t").fetchone() == (kept,)


def test_max_path_depth_zero_is_no_limit():
    """0 keeps a URL of any depth."""
    deep = "http://h.example/" + "d/" * 50
    cfg = UrlsConfig(max_path_depth=0, max_segment_repeats=0)
    assert UrlFilters(cfg).check(deep) is None
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT ?::VARCHAR AS url", [deep])
    assert con.execute(f"SELECT {filter_sql(cfg, 'url')} FROM t").fetchone() == (True,)
