"""The URL normalizer: one spelling per URL, clear reasons for rejected ones."""

import re
from urllib.parse import urlsplit

import ada_url
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.urls.normalize import InvalidUrl, host_of, normalize

BASE = "https://www.example.com/dir/sub/page.html?x=1#top"

NORMALIZED = [
    # whitespace
    ("  http://example.com/a \n", None, "http://example.com/a"),
    ("http://exam\tple.com/a\nb\r/c", None, "http://example.com/ab/c"),
    ("\u00a0http://example.com/a\u3000", None, "http://example.com/a"),
    ("\x01\x1f http://example.com/a\x00", None, "http://example.com/a"),
    ("http://example.com/a b", None, "http://example.com/a%20b"),
    # relative references
    ("../a", BASE, "https://www.example.com/dir/a"),
    ("../../../../a", BASE, "https://www.example.com/a"),
    ("b/c.html", BASE, "https://www.example.com/dir/sub/b/c.html"),
    ("./c", BASE, "https://www.example.com/dir/sub/c"),
    ("..", BASE, "https://www.example.com/dir/"),
    ("/abs/path", BASE, "https://www.example.com/abs/path"),
    ("?q", BASE, "https://www.example.com/dir/sub/page.html?q"),
    ("?", BASE, "https://www.example.com/dir/sub/page.html"),
    ("//other.host/x", BASE, "https://other.host/x"),
    ("//OTHER.host:443", BASE, "https://other.host/"),
    ("#frag", BASE, "https://www.example.com/dir/sub/page.html?x=1"),
    ("", BASE, "https://www.example.com/dir/sub/page.html?x=1"),
    ("   ", BASE, "https://www.example.com/dir/sub/page.html?x=1"),
    ("\\\\evil.example/x", BASE, "https://evil.example/x"),
    ("\\x", BASE, "https://www.example.com/x"),
    ("https:rel", BASE, "https://www.example.com/dir/sub/rel"),
    ("http:other.example/x", BASE, "http://other.example/x"),
    ("HTTP://Abs.Example/x", BASE, "http://abs.example/x"),
    ("a", "http://u:p@h.example:8080/d/f", "http://u:p@h.example:8080/d/a"),
    ("/a", "http://u:p@h.example:8080/d/f", "http://u:p@h.example:8080/a"),
    ("x", "http://h.example./d/f", "http://h.example/d/x"),
    ("http://h.example/", "", "http://h.example/"),
    # scheme and host case, IDN, trailing dot, IP literals
    ("HTTP://WWW.Example.COM/Path/File", None, "http://www.example.com/Path/File"),
    ("http://B\u00fccher.example/", None, "http://xn--bcher-kva.example/"),
    ("http://b%C3%BCcher.example/", None, "http://xn--bcher-kva.example/"),
    ("http://example.com./a", None, "http://example.com/a"),
    ("http://example.com..:8080/a", None, "http://example.com:8080/a"),
    ("http://0x7f.1./", None, "http://127.0.0.1/"),
    ("http://[0:0::1]:80/", None, "http://[::1]/"),
    # ports
    ("http://example.com:80/", None, "http://example.com/"),
    ("https://example.com:443/", None, "https://example.com/"),
    ("http://example.com:0080/", None, "http://example.com/"),
    ("https://example.com:80/", None, "https://example.com:80/"),
    ("http://example.com:/", None, "http://example.com/"),
    # paths
    ("http://example.com", None, "http://example.com/"),
    ("http://example.com?a=1", None, "http://example.com/?a=1"),
    ("http://example.com/a/./b/../c/", None, "http://example.com/a/c/"),
    ("http://example.com/a/%2e%2E/b", None, "http://example.com/b"),
    # percent-encoding
    ("http://example.com/%7e%41%2d%5F%2e%7a", None, "http://example.com/~A-_.z"),
    ("http://example.com/%c3%a9%2f?q=%3d%7E", None, "http://example.com/%C3%A9%2F?q=%3D~"),
    ("http://example.com/%zz%4", None, "http://example.com/%25zz%254"),
    ("http://example.com/caf\u00e9?q=\u4e2d", None, "http://example.com/caf%C3%A9?q=%E4%B8%AD"),
    ("http://example.com/[a]|^{}`", None, "http://example.com/%5Ba%5D%7C%5E%7B%7D%60"),
    ('http://example.com/?q=[]|^{}`\\"<>', None, "http://example.com/?q=%5B%5D%7C%5E%7B%7D%60%5C%22%3C%3E"),
    ("http://u%7e:p%41%3a@example.com/", None, "http://u~:pA%3A@example.com/"),
    # fragment and empty query
    ("http://example.com/a#b", None, "http://example.com/a"),
    ("http://example.com/a?#b", None, "http://example.com/a"),
    ("http://example.com/a?", None, "http://example.com/a"),
    ("http://example.com/a??", None, "http://example.com/a??"),
    ("http://example.com/a?b=", None, "http://example.com/a?b="),
]


@pytest.mark.parametrize(("url", "base", "expected"), NORMALIZED)
def test_normalize(url, base, expected):
    """Each rule of the normalizer gives the documented spelling."""
    assert normalize(url, base) == expected


REJECTED = [
    ("mailto:news@example.com", BASE, "unsupported scheme mailto"),
    ("javascript:void(0)", BASE, "unsupported scheme javascript"),
    ("JavaScript:alert(1)", None, "unsupported scheme javascript"),
    ("ftp://example.com/file", None, "unsupported scheme ftp"),
    ("data:text/plain,hi", BASE, "unsupported scheme data"),
    ("tel:+44-20-1234", BASE, "unsupported scheme tel"),
    ("file:///etc/passwd", None, "unsupported scheme file"),
    ("a.html", "ftp://example.com/dir/", "unsupported scheme ftp"),
    ("http://", None, "no host"),
    ("http://:80/", None, "no host"),
    ("http://./x", None, "no host"),
    ("//", BASE, "no host"),
    ("http://example.com:99999/", None, "invalid port"),
    ("http://example.com:8x/", None, "invalid port"),
    ("//example.com:-1/", BASE, "invalid port"),
    ("http://exa mple.com/", None, "invalid host"),
    ("http://[::1/", None, "invalid host"),
    ("example.com/page", None, "no scheme"),
    ("/page", None, "no scheme"),
    ("", None, "empty url"),
    (" \t\n", None, "empty url"),
    ("http://example.com/" + "a" * 8200, None, "url too long"),
    ("http://example.com/" + "\u00e9" * 2000, None, "url too long"),
    ("http://example.com/\ud800", None, "invalid characters"),
    ("a", "not a url", "invalid base url"),
    ("a", "mailto:x@example.com", "invalid base url (unsupported scheme mailto)"),
]


@pytest.mark.parametrize(("url", "base", "reason"), REJECTED)
def test_rejected_with_reason(url, base, reason):
    """Unusable URLs raise InvalidUrl whose message is the short reason."""
    with pytest.raises(InvalidUrl) as exc:
        normalize(url, base)
    assert str(exc.value) == reason


def test_invalid_url_is_a_value_error():
    """Callers may catch InvalidUrl as ValueError."""
    assert issubclass(InvalidUrl, ValueError)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://example.com/", "example.com"),
        ("https://www.example.com:8443/a:b@c", "www.example.com"),
        ("http://u:p@example.com:8080/x", "example.com"),
        ("http://[::1]:8080/", "[::1]"),
        ("http://127.0.0.1/", "127.0.0.1"),
        ("file:///etc/passwd", ""),
        ("mailto:x@example.com", ""),
    ],
)
def test_host_of(url, host):
    """host_of gives the host without userinfo or port, '' when there is none."""
    assert host_of(url) == host


# Property tests: strings that look like URLs, mixing every awkward character.
URL_CHARS = "aZz09-._~:/?#[]@!$&'()*+,;=%\\ \t\n|^{}`\"<>\u00e9\u4e2d\x00\x7fAFcf"
tails = st.text(alphabet=URL_CHARS, max_size=40)
prefixes = st.sampled_from(
    ["http://", "https://", "HTTP://", "http:", "https:/", "//", "/", "", "ftp://", "mailto:"]
)
hosts = st.sampled_from(
    [
        "example.com",
        "EXAMPLE.com.",
        "b\u00fccher.de",
        "127.0.0.1",
        "[::1]",
        "u:p@h.org:8080",
        "h:80",
        "h:443",
        "0x7f.1.",
        "xn--bcher-kva.de",
        "",
        "a%41.b",
        "h:99999",
    ]
) | st.text(alphabet=URL_CHARS, max_size=12)
urlish = st.builds(lambda p, h, t: p + h + t, prefixes, hosts, tails)
BASES = [
    BASE,
    "http://example.com",
    "http://u:p@Example.COM.:8080/a/b/c?q#f",
    "https://example.com/a%7e/%5b/..//x/?",
    "http://127.0.0.1/dir/",
]
RFC3986_PATH_QUERY = re.compile(r"[A-Za-z0-9\-._~:/?@!$&'()*+,;=]|%[0-9A-F]{2}")


def normalized_or_none(url, base=None):
    """normalize(), with None for a rejected URL."""
    try:
        return normalize(url, base)
    except InvalidUrl:
        return None


@settings(max_examples=500, deadline=None)
@given(urlish)
def test_idempotent(url):
    """Normalizing a normalized URL changes nothing."""
    once = normalized_or_none(url)
    if once is not None:
        assert normalize(once) == once


@settings(max_examples=500, deadline=None)
@given(urlish, st.sampled_from(BASES))
def test_result_parses_again(url, base):
    """A result is a valid absolute http(s) URL, RFC 3986 clean, without fragment, and stable."""
    out = normalized_or_none(url, base)
    if out is None:
        return
    assert ada_url.check_url(out)
    parts = urlsplit(out)
    assert parts.scheme in ("http", "https") and parts.netloc and parts.path.startswith("/")
    assert "#" not in out and out.find("?") != len(out) - 1 and len(out) <= 8192
    assert host_of(out) == ada_url.URL(out).hostname
    assert RFC3986_PATH_QUERY.sub("", out[out.index("/", 8) :]) == ""
    assert normalize(out) == out


@given(st.text())
def test_arbitrary_text_raises_only_invalid_url(text):
    """Any text either normalizes or raises InvalidUrl, never another exception."""
    normalized_or_none(text)


@given(st.text(), st.sampled_from(BASES) | st.text())
def test_arbitrary_reference_and_base_raise_only_invalid_url(ref, base):
    """Any reference against any base either normalizes or raises InvalidUrl."""
    normalized_or_none(ref, base)


@settings(max_examples=1000, deadline=None)
@given(st.one_of(tails, urlish), st.sampled_from(BASES))
def test_resolution_agrees_with_whatwg(ref, base):
    """The fast resolution path gives what a WHATWG join followed by normalize gives."""
    try:
        joined = ada_url.join_url(base, ref)
    except ValueError:
        joined = None
    expected = None if joined is None else normalized_or_none(joined)
    assert normalized_or_none(ref, base) == expected
