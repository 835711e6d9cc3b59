"""The fixes crawler/fetcher/robotstxt.py makes around Protego, beyond google/robotstxt's cases."""

from __future__ import annotations

import pytest

from crawler.fetcher.robots import parse_robots
from crawler.fetcher.robotstxt import RobotsTxt

SITE = "http://a.test"


@pytest.mark.parametrize(
    ("robots", "agent", "path", "allowed"),
    [
        # Other records among a group's user-agent lines do not split it (RFC 9309 2.2.4).
        (b"User-agent: a\nCrawl-delay: 5\nUser-agent: b\nDisallow: /\n", "a", "/x", False),
        (b"User-agent: badbot\nCrawl-delay: 60\nUser-agent: *\nDisallow: /admin\n", "badbot", "/admin", False),
        (b"User-agent: a\nSitemap: /s.xml\nHost: a.test\nUser-agent: b\nDisallow: /\n", "a", "/x", False),
        # ...and after the group's rules they still end nothing a user-agent line would not.
        (b"User-agent: a\nDisallow: /x\nFoo: bar\nUser-agent: b\nDisallow: /\n", "a", "/y", True),
        # The agent matches a product token whole (RFC 9309 2.2.1), not a prefix of it at a word start.
        (b"User-agent: c\nDisallow: /\n", "crawler", "/x", True),
        (b"User-agent: crawl\nDisallow: /\n", "crawler", "/x", True),
        (b"User-agent: crawler-news\nDisallow: /\n", "crawler", "/x", True),
        (b"User-agent: CRAWLER/2.1\nDisallow: /\n", "crawler", "/x", False),
        (b"User-agent: *\nDisallow: /\nUser-agent: crawler\nAllow: /\n", "Crawler", "/x", True),
        (b"User-agent: *bot\nDisallow: /\n", "crawler", "/x", True),
        # A byte order mark is skipped in a str too.
        ("\ufeffUser-agent: a\nDisallow: /\n".encode(), "a", "/x", False),
        # An escape that is no part of a UTF-8 sequence is that byte, not U+FFFD (which any other such byte was).
        (b"User-agent: *\nDisallow: /caf%E9\n", "a", "/caf%E9", False),
        (b"User-agent: *\nDisallow: /caf%E9\n", "a", "/caf%e9", False),
        (b"User-agent: *\nDisallow: /caf%E9\n", "a", "/caf%FF", True),
        (b"User-agent: *\nDisallow: /caf\xe9\n", "a", "/caf%E9", False),  # a raw Latin-1 byte in the file
        (b"User-agent: *\nDisallow: /caf\xe9\n", "a", "/caf%E8", True),
        (b"User-agent: *\nDisallow: /%E3%83%84\n", "a", "/%E3%83%84%FF", False),  # the valid part still matches
        (b"User-agent: *\nDisallow: /%E3%83%84\n", "a", "/ツ", False),
        # Only CR and LF end a line: a U+2028 in a rule is part of its path.
        ("User-agent: *\nDisallow: /a\u2028b\n".encode(), "a", "/a", True),
        ("User-agent: *\nDisallow: /a\u2028b\n".encode(), "a", "/a%E2%80%A8b", False),
        # RFC 9309 2.2.2: /robots.txt is implicitly allowed.
        (b"User-agent: *\nDisallow: /\n", "a", "/robots.txt", True),
    ],
)
def test_allowed(robots, agent, path, allowed):
    rules = parse_robots(robots)
    assert rules.reason == "parsed"
    assert rules.allowed(SITE + path, agent) is allowed


@pytest.mark.parametrize(
    ("robots", "agent", "delay"),
    [
        # A Crawl-delay among user-agent lines is for the agents named just before it...
        (b"User-agent: a\nCrawl-delay: 5\nUser-agent: b\nDisallow: /\n", "A", 5.0),
        (b"User-agent: a\nCrawl-delay: 5\nUser-agent: b\nDisallow: /\n", "b", None),
        (b"User-agent: badbot\nCrawl-delay: 60\nUser-agent: *\nDisallow: /admin\n", "crawler", None),
        (b"User-agent: *\nCrawl-delay: 2\nUser-agent: ab\nCrawl-delay: 5\n", "a", 2.0),
        (b"User-agent: *\nCrawl-delay: 2\nUser-agent: ab\nCrawl-delay: 5\n", "ab", 5.0),
        (b"User-agent: a\nUser-agent: b\nCrawl-delay: 3\nUser-agent: c\nDisallow: /\n", "b", 3.0),
        # ...and one after the group's rules for the whole group, as before.
        (b"User-agent: a\nUser-agent: b\nDisallow: /x\nCrawl-delay: 4\nUser-agent: c\nDisallow: /\n", "a", 4.0),
        (b"User-agent: a\nUser-agent: b\nDisallow: /x\nCrawl-delay: 4\nUser-agent: c\nDisallow: /\n", "c", None),
        (b"User-agent: ab\nCrawl-delay: 5\n", "a", None),
    ],
)
def test_crawl_delay_follows_the_same_groups(robots, agent, delay):
    assert parse_robots(robots).crawl_delay(agent) == delay


@pytest.mark.parametrize(
    "robots",
    [
        # google/robotstxt ID_NonStandardLineExample_Sitemap: a Sitemap line may appear anywhere.
        b"User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nSitemap: http://foo.bar/sitemap.xml\n",
        b"Sitemap: http://foo.bar/sitemap.xml\nUser-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n",
        b"User-Agent: foo\nSitemap: http://foo.bar/sitemap.xml\nUser-Agent: bar\nDisallow: /\n",
    ],
)
def test_sitemaps_kept(robots):
    assert parse_robots(robots).sitemaps == ["http://foo.bar/sitemap.xml"]


def test_str_input_gets_the_same_fixes():
    parser = RobotsTxt.parse("\ufeffUser-agent: FooBot\nUnknown: x\nUser-agent: *\nDisallow: /\n")
    assert not parser.can_fetch(SITE + "/", "FooBot")
