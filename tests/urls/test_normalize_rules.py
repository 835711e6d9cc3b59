"""The configured normalizer (urls.*): slashes collapsed, tracking and session parameters dropped, schemes."""

import pickle

import ada_url
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.config import CrawlerConfig, load_config
from crawler.errors import ConfigError
from crawler.protocols.base import served_schemes
from crawler.urls.normalize import InvalidUrl, Normalizer

DEFAULT = Normalizer.from_config(CrawlerConfig())
FILES = ["protocols.file.enabled=true", "urls.schemes=[http, https, file]"]

COLLAPSED = [
    ("http://h.example/p//0.html", None, "http://h.example/p/0.html"),
    ("http://h.example//a///b/", None, "http://h.example/a/b/"),
    ("https://h.example//", None, "https://h.example/"),
    ("http://h.example/a//b?x=//y", None, "http://h.example/a/b?x=//y"),  # never in the query
    ("http://h.example/a?x=//y#//z", None, "http://h.example/a?x=//y"),
    ("http://h.example/a%2F%2Fb//c", None, "http://h.example/a%2F%2Fb/c"),  # an escaped slash is no slash
    ("http://h.example/a/b//../c", None, "http://h.example/a/b/c"),  # dot segments first, as WHATWG does
    ("//other.example//x", "http://h.example/", "http://other.example/x"),  # 'scheme://' itself stays
    ("a//b", "http://h.example/d/", "http://h.example/d/a/b"),
    ("a\\\\b", "http://h.example/d/", "http://h.example/d/a/b"),  # backslashes are slashes in http(s)
    # The page's own URL is normalized before its links are resolved against it.
    ("../p/1.html", "http://h.example/p//0.html", "http://h.example/p/1.html"),
    ("x", "http://h.example/a//b/c", "http://h.example/a/b/x"),
    ("", "http://h.example//a", "http://h.example/a"),
]

DROPPED = [
    ("http://h.example/a?utm_source=x&utm_medium=y", None, "http://h.example/a"),
    ("http://h.example/a?id=1&utm_source=x", None, "http://h.example/a?id=1"),
    ("http://h.example/a?UTM_Campaign=x&id=1&Utm_Term=2", None, "http://h.example/a?id=1"),
    ("http://h.example/a?gclid=1&fbclid=2&msclkid=3&page=2", None, "http://h.example/a?page=2"),
    ("http://h.example/a?dclid=1&gbraid=2&wbraid=3&_ga=4&_gl=5&yclid=6&igshid=7", None, "http://h.example/a"),
    ("http://h.example/a?mc_cid=1&mc_eid=2&q=x", None, "http://h.example/a?q=x"),
    ("http://h.example/a?utm%5Fsource=x", None, "http://h.example/a"),  # the escaped name is the same name
    ("http://h.example/a?&utm_source=x&", None, "http://h.example/a"),
    ("http://h.example/a?jsessionid", None, "http://h.example/a"),  # a name without a value
    ("http://h.example/a?PHPSESSID=abc&b=2", None, "http://h.example/a?b=2"),
    ("http://h.example/a?ASPSESSIONIDQQGGQGPG=abc&x=1", None, "http://h.example/a?x=1"),
    ("http://h.example/a?CFID=1&CFTOKEN=2&sessionid=3", None, "http://h.example/a"),
    ("http://h.example/a?x=1#utm_source=y", None, "http://h.example/a?x=1"),
    ("http://h.example/a;jsessionid=0A1B?x=1", None, "http://h.example/a?x=1"),
    ("http://h.example/app/b.jsp;JSESSIONID=0A1B", None, "http://h.example/app/b.jsp"),
    ("http://h.example/a;jsessionid=1;type=a/b", None, "http://h.example/a;type=a/b"),
    ("http://h.example/a/.;jsessionid=1/b", None, "http://h.example/a/b"),  # what is left may be a dot segment
    ("?utm_source=feed", "http://h.example/a?x=1", "http://h.example/a"),
    ("b?fbclid=1", "http://h.example/d/a?gclid=2", "http://h.example/d/b"),
    # Kept: parameters that may change the page.
    ("http://h.example/a?sid=1", None, "http://h.example/a?sid=1"),  # a story id on PHP-Nuke sites
    ("http://h.example/a?utm=1&utmx=2", None, "http://h.example/a?utm=1&utmx=2"),  # utm_* needs the '_'
    ("http://h.example/a?x=utm_source", None, "http://h.example/a?x=utm_source"),  # a value, not a name
    ("http://h.example/a;type=a/b", None, "http://h.example/a;type=a/b"),
    ("http://h.example/utm_source=x/a", None, "http://h.example/utm_source=x/a"),
]


@pytest.mark.parametrize(("url", "base", "expected"), COLLAPSED + DROPPED)
def test_default_rules(url, base, expected):
    """With the shipped urls.* defaults, each variant gets the one spelling of its page."""
    assert DEFAULT.normalize(url, base) == expected


OPTIONS = [
    ({"collapse_slashes": False}, "http://h.example/p//0.html?utm_source=x", "http://h.example/p//0.html?utm_source=x"),
    ({"collapse_slashes": True}, "http://h.example/p//0.html?utm_source=x", "http://h.example/p/0.html?utm_source=x"),
    ({"drop_params": ["ref"]}, "http://h.example/a?REF=x&utm_source=y", "http://h.example/a?utm_source=y"),
    ({"drop_params": ["x_*", "[ab]c"]}, "http://h.example/a?x_1=1&ac=2&bc=3&cc=4&x=5", "http://h.example/a?cc=4&x=5"),
    ({"drop_params": ["*id"]}, "http://h.example/a?pid=1&id=2&idx=3", "http://h.example/a?idx=3"),
    ({"drop_params": ["s?d"]}, "http://h.example/a;sid=1;sd=2?sxd=3", "http://h.example/a;sd=2"),
]


@pytest.mark.parametrize(("options", "url", "expected"), OPTIONS)
def test_options(options, url, expected):
    """collapse_slashes and drop_params (names and fnmatch globs, any case) do what they say, and only that."""
    assert Normalizer(**options).normalize(url) == expected


def _normalizer(overrides):
    return Normalizer.from_config(load_config(None, overrides))


SCHEMES = [
    ([], "file:///etc/passwd", None, "unsupported scheme file"),
    (["urls.schemes=[http, https, file]"], "file:///x", None,
     "unsupported scheme file (protocols.file.enabled is false)"),
    (["protocols.file.enabled=true"], "file:///x", None, "unsupported scheme file (not in urls.schemes)"),
    (["urls.schemes=[http]"], "https://h.example/", None, "unsupported scheme https (not in urls.schemes)"),
    (["urls.schemes=[http, https, ftp]"], "ftp://h.example/x", None,
     "unsupported scheme ftp (no protocol plugin serves it)"),
    (["urls.schemes=[http]"], "x", "https://h.example/", "unsupported scheme https (not in urls.schemes)"),
    # As browsers do, a web page or its redirect never leads to the local disk.
    (FILES, "file:///etc/passwd", "http://h.example/", "file: url from a non-file page"),
    (FILES, "FILE:///etc/passwd", "https://h.example/a", "file: url from a non-file page"),
]


@pytest.mark.parametrize(("overrides", "url", "base", "reason"), SCHEMES)
def test_scheme_rejected_with_reason(overrides, url, base, reason):
    """A scheme is accepted only when urls.schemes lists it and an enabled plugin serves it; the reason says which."""
    with pytest.raises(InvalidUrl) as exc:
        _normalizer(overrides).normalize(url, base)
    assert str(exc.value) == reason


FILE_URLS = [
    ("file:///srv/docs/index.html", None, "file:///srv/docs/index.html"),
    ("FILE://localhost/srv/a/../b.html#top", None, "file:///srv/b.html"),
    ("file:///srv//docs/a%7e.html?utm_source=x", None, "file:///srv/docs/a~.html"),
    ("c.html", "file:///srv/docs/b.html", "file:///srv/docs/c.html"),
    ("../up.html", "file:///srv//docs/b.html", "file:///srv/up.html"),
    ("/root.html", "file:///srv/docs/b.html", "file:///root.html"),
    ("file:///srv/x.html", "file:///srv/docs/b.html", "file:///srv/x.html"),
    ("https://h.example/x", "file:///srv/docs/b.html", "https://h.example/x"),
]


@pytest.mark.parametrize(("url", "base", "expected"), FILE_URLS)
def test_file_urls_with_the_file_protocol_enabled(url, base, expected):
    """With protocols.file.enabled and file in urls.schemes, file: URLs normalize, relative ones too."""
    assert _normalizer(FILES).normalize(url, base) == expected


def test_http_only_when_urls_schemes_says_so():
    """urls.schemes [http] leaves https out of the normalizer too."""
    assert _normalizer(["urls.schemes=[http]"]).normalize("HTTP://h.example//a") == "http://h.example/a"


def test_served_schemes_names_the_switch():
    """Every registered protocol plugin is listed; file's is off until protocols.file.enabled."""
    assert served_schemes(CrawlerConfig()) == {"file": "protocols.file.enabled is false", "http": "", "https": ""}
    assert served_schemes(load_config(None, ["protocols.file.enabled=true"]))["file"] == ""


def test_normalizer_pickles_with_its_rules():
    """A parser's normalizer goes to worker processes with its options."""
    clone = pickle.loads(pickle.dumps(_normalizer(FILES)))
    assert clone.normalize("file:///a//b?gclid=1") == "file:///a/b"
    assert clone.resolve("//x", "http://h.example/") == "http://x/"


@pytest.mark.parametrize("value", ['[""]', "[a=b]", "['a b']", "[utm_*&x]", "[/x]"])
def test_bad_drop_params_are_config_errors(value):
    """A drop_params entry that cannot be a parameter name stops the command, naming the key."""
    with pytest.raises(ConfigError, match=r"urls\.drop_params\.0"):
        load_config(None, [f"urls.drop_params={value}"])


def test_empty_drop_params_keeps_every_parameter():
    """urls.drop_params: [] turns the rule off."""
    url = "http://h.example/a?utm_source=x;jsessionid=1"
    assert _normalizer(["urls.drop_params=[]"]).normalize(url) == url


# Property tests: references mixing the characters and pieces these rules look at.
PIECES = ["/", "//", "///", "a", "..", ".", "?", "&", "=", "#", ";", "%2F", "\\", "utm_source=1", "UTM_x",
          "jsessionid=z", ";jsessionid=1", "gclid", "id=2", "%5F", "x"]
refs = st.lists(st.sampled_from(PIECES), max_size=10).map("".join)
prefixes = st.sampled_from(["", "/", "//h.example/", "http://h.example/", "HTTPS://H.example//", "?"])
references = st.builds(lambda p, r: p + r, prefixes, refs)
BASES = ["http://h.example/", "http://h.example/a//b/c.html?utm_source=1&q=2", "https://h.example/x;jsessionid=3/y"]


def normalized_or_none(normalizer, url, base=None):
    try:
        return normalizer.normalize(url, base)
    except InvalidUrl:
        return None


@settings(max_examples=1000, deadline=None)
@given(references, st.sampled_from(BASES))
def test_idempotent_with_rules(ref, base):
    """Normalizing a result again changes nothing: a dropped or collapsed URL is final."""
    once = normalized_or_none(DEFAULT, ref, base)
    if once is not None:
        assert DEFAULT.normalize(once) == once
        assert "//" not in once[once.index("//") + 2 :].split("?")[0]


@settings(max_examples=1000, deadline=None)
@given(references, st.sampled_from(BASES))
def test_links_resolve_against_the_normalized_page_url(ref, base):
    """A link resolves as a WHATWG join against the page's normalized URL, then normalized."""
    try:
        joined = ada_url.join_url(DEFAULT.normalize(base), ref)
    except ValueError:
        joined = None
    expected = None if joined is None else normalized_or_none(DEFAULT, joined)
    assert normalized_or_none(DEFAULT, ref, base) == expected


PAGE = (b'<html><head><base href="/docs//v1/"></head><body><a href="../p/1.html">1</a>'
        b'<a href="/p//0.html?utm_source=x">0</a><a href="http://h.example/q;jsessionid=7?fbclid=2">q</a>'
        b'<a href="file:///etc/passwd">f</a></body></html>')
SITEMAP = (b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
           b"<url><loc>http://h.example/a//b?gclid=1</loc></url><url><loc>/c?utm_term=x&amp;page=2</loc></url></urlset>")


@pytest.mark.parametrize(("body", "content_type", "expected"), [
    (PAGE, "text/html", ["http://h.example/docs/p/1.html", "http://h.example/p/0.html", "http://h.example/q"]),
    (SITEMAP, "application/xml", ["http://h.example/a/b", "http://h.example/c?page=2"]),
])
def test_parsers_apply_the_configured_rules(body, content_type, expected):
    """The parsers built from the config spell their outlinks by the urls.* rules, a web page's file: link
    dropped even with the file protocol on."""
    from crawler.parsers.dispatch import ParserDispatch

    parsed = ParserDispatch(load_config(None, FILES)).parse(body, "http://h.example/x//y.html", content_type)
    assert [o.url for o in parsed.outlinks] == expected


def test_redirect_targets_follow_the_rules():
    """A redirect hop's target is normalized with the crawl's rules, against the normalized source."""
    from crawler.fetcher.redirects import RedirectPolicy

    policy = RedirectPolicy(CrawlerConfig())
    assert policy.target("..//b?utm_source=x", "http://h.example/a//c") == "http://h.example/b"
