"""bench/observer.py, the outside judge of politeness: its URL rules, its robots.txt matcher, its verdicts."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from observer import (  # noqa: E402
    NGINX_LOG_FORMAT,
    Origin,
    Request,
    Robots,
    from_devserver,
    main,
    max_in_flight,
    normalize_url,
    observe,
    read_jsonl,
    read_nginx,
    request_to_json,
)


@pytest.mark.parametrize(("url", "expected"), [
    ("HTTP://Example.COM:80/a", "http://example.com/a"),
    ("https://example.com:443", "https://example.com/"),
    ("http://example.com:8080/a/./b/../c", "http://example.com:8080/a/c"),
    ("http://example.com/a/b/..", "http://example.com/a/"),
    ("http://example.com//a///b", "http://example.com/a/b"),
    ("http://example.com/%7euser/%2f%e2%82%ac", "http://example.com/~user/%2F%E2%82%AC"),
    ("http://example.com/p?q=%7e&r=%aa", "http://example.com/p?q=~&r=%AA"),
    ("http://example.com/a#frag", "http://example.com/a"),
    ("http://example.com/caf\u00e9", "http://example.com/caf%C3%A9"),
])
def test_url_rules(url, expected):
    assert normalize_url(url) == expected


ROBOTS_CASES = [
    # (robots.txt, agent, path, allowed)
    ("User-agent: *\nDisallow: /private/\n", "crawler", "/private/x", False),
    ("User-agent: *\nDisallow: /private/\n", "crawler", "/public", True),
    ("User-agent: *\nDisallow: /\nAllow: /ok\n", "crawler", "/ok/1", True),  # longer match wins
    ("User-agent: *\nDisallow: /page\nAllow: /page\n", "crawler", "/page", True),  # a tie: Allow
    ("User-agent: *\nDisallow: /*.pdf$\n", "crawler", "/a/b.pdf", False),
    ("User-agent: *\nDisallow: /*.pdf$\n", "crawler", "/a/b.pdf?x", True),
    ("User-agent: other\nDisallow: /\n", "crawler", "/x", True),  # no group for us, none for *
    ("User-agent: Crawler/2.0\nDisallow: /x\nUser-agent: *\nDisallow: /\n", "crawler", "/y", True),
    ("User-agent: a\nDisallow: /a\nUser-agent: crawler\nDisallow: /b\n\nuser-agent: CRAWLER\nDisallow: /c\n",
     "crawler", "/c", False),  # groups for one agent merge
    ("User-agent: *\nDisallow: /\n", "crawler", "/robots.txt", True),
    ("User-agent: *\nDisallow:\n", "crawler", "/x", True),  # an empty Disallow is no rule
    ("User-agent: *\nDisallow: /%7Euser\n", "crawler", "/~user/a", False),  # percent-encoding case
    ("User-agent: *\nDisallow: /caf\u00e9\n", "crawler", "/caf%C3%A9", False),
    # google/robotstxt ID_LineSyntax_Groups_OtherRules: a line not understood ends no group
    ("User-agent: FooBot\ninvalid-unknown-line: 0\nUser-agent: *\nDisallow: /\n", "foobot", "/", False),
    # ID_UTF8ByteOrderMarkIsSkipped
    ("\ufeffUser-agent: foobot\nDisallow: /AnyValue\n", "foobot", "/AnyValue", False),
    ("User-agent: *\r\nDisallow: /a # comment\r\n", "crawler", "/a", False),
]


@pytest.mark.parametrize(("text", "agent", "path", "allowed"), ROBOTS_CASES)
def test_robots_matcher(text, agent, path, allowed):
    assert Robots(text).allowed(agent, path) is allowed


def test_robots_crawl_delay_of_the_matching_group():
    robots = Robots("User-agent: crawler\nCrawl-delay: 2\nDisallow: /x\nUser-agent: *\nCrawl-delay: 9\n")
    assert (robots.crawl_delay("crawler"), robots.crawl_delay("other")) == (2.0, 9.0)


def req(start, end, target="/p", status=200, host="127.0.0.2", port=8000, retry_after=None):
    return Request(start, end, "http", host, port, "GET", target, status, retry_after)


ORIGIN = "http://127.0.0.2:8000"
ROBOTS = "User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n"


@pytest.mark.parametrize(("log", "attr", "count"), [
    # polite: robots.txt first, starts 1 s apart, one in flight
    ([req(0, .1, "/robots.txt"), req(1, 1.1, "/a"), req(2, 2.1, "/b")], "violations", 0),
    ([req(0, .1, "/robots.txt"), req(1, 1.1, "/private/a")], "robots_denied", 1),
    ([req(0, .1, "/a"), req(1, 1.1, "/robots.txt")], "before_robots", 1),
    ([req(0, .1, "/robots.txt", 503), req(1, 1.1, "/a")], "robots_denied", 1),  # 5xx: disallow all
    ([req(0, .1, "/robots.txt", 404), req(1, 1.1, "/private/a")], "robots_violations", 0),  # 4xx: allow all
    ([req(0, .1, "/robots.txt"), req(1, 1.1, "/a"), req(1.5, 1.6, "/b")], "gaps_below_delay", 1),
    # the Crawl-delay is unknowable until robots.txt has arrived: only min_delay (0) holds before
    ([req(0, .5, "/robots.txt"), req(.2, .3, "/robots.txt"), req(1.5, 1.6, "/a")], "gaps_below_delay", 0),
    ([req(0, .1, "/robots.txt"), req(1, 1.1, "/a"), req(1.998, 2.1, "/b")], "gaps_below_delay", 0),  # within 2 ms
    ([req(0, .1, "/robots.txt"), req(1, 3, "/a"), req(2, 4, "/b")], "over_in_flight", 1),
    ([req(0, .1, "/robots.txt"), req(1, 1.1, "/a", 429, retry_after=5), req(2.1, 2.2, "/b"),
      req(6.2, 6.3, "/c")], "early_retry_after", 1),
    ([req(0, .1, "/robots.txt", 503, retry_after=3), req(1.1, 1.2, "/robots.txt"),
      req(2.5, 2.6, "/robots.txt", 503, retry_after=3), req(4, 4.1, "/robots.txt")], "early_retry_after", 3),  # each 503 holds anew
    ([req(0, .1, "/robots.txt"), req(1, 1.1, "/a"), req(2, 2.1, "/A/../a")], "duplicates", 1),
    ([req(0, .1, "/robots.txt"), req(1, 1.1, "/a", 503), req(2, 2.1, "/a")], "duplicates", 0),  # a retry
    ([req(0, .1, "/robots.txt"), req(1, 1.1, "/cal/2026"), req(2, 2.1, "/cal/2027")], "trap_requests", 2),
])
def test_verdicts(log, attr, count):
    origins = {ORIGIN: Origin(robots=ROBOTS, in_flight=1, traps=("/cal/",))}
    total, queues = observe(log, origins)
    assert getattr(total, attr) == count, total.examples
    assert list(queues) == ["127.0.0.2"]


def test_origins_of_one_host_share_its_queue_and_keep_their_own_robots():
    """robots.txt decides per origin, politeness counts per queue (here: the host)."""
    log = [req(0, .1, "/robots.txt", port=1), req(.2, .3, "/robots.txt", 500, port=2), req(.4, .5, "/a", port=1),
           req(.6, .7, "/a", port=2)]
    total, queues = observe(log, {"http://127.0.0.2:1": Origin(delay=0.2), "http://127.0.0.2:2": Origin()})
    assert (total.robots_denied, total.before_robots, total.gaps_below_delay) == (1, 0, 0)
    assert list(queues) == ["127.0.0.2"] and queues["127.0.0.2"].requests == 4


def conn(start, end, c):
    return Request(start, end, "http", "h", 80, "GET", "/", 200, conn=c)


@pytest.mark.parametrize(("log", "peak"), [
    ([req(0, 1), req(1, 2), req(1.5, 3)], 2),  # an end at a start is no overlap
    ([req(1, 1)], 1),  # no duration at the log's resolution: still one in flight
    ([conn(1, 1, "a"), conn(1, 1, "a"), conn(1, 1, "b")], 2),  # one connection holds one request at a time
    ([conn(0, 2, "a"), conn(1, 1, "b"), conn(1, 3, "c")], 3),
])
def test_max_in_flight(log, peak):
    assert max_in_flight(log) == peak


def test_an_absolute_form_target_is_its_path():
    assert req(0, 1, "http://127.0.0.2:8000/x/../y").url == "http://127.0.0.2:8000/y"


def test_logs_read_back():
    line = ('1764633600.250 0.200 17 http 127.0.1.1 18080 "127.0.1.1:18080" "GET /p/%7e1.html HTTP/1.1" 429 "7"\n'
            '1764633600.300 0.000 18 http 127.0.1.1 18080 "" "\\x16\\x03" 400 "-"\n')
    (r,) = read_nginx(line.splitlines())
    assert (r.start, r.end, r.host, r.port, r.status, r.retry_after, r.url) == (
        pytest.approx(1764633600.05), 1764633600.25, "127.0.1.1", 18080, 429, 7.0, "http://127.0.1.1:18080/p/~1.html")
    assert list(read_jsonl([request_to_json(r)])) == [r]
    assert "$msec" in NGINX_LOG_FORMAT and "$request_time" in NGINX_LOG_FORMAT
    with pytest.raises(ValueError, match="line 1"):
        list(read_nginx(["not a log line"]))
    with pytest.raises(ValueError, match="x.jsonl line 2"):
        list(read_jsonl([request_to_json(r), "{"], "x.jsonl"))


def test_devserver_records():
    class Rec:
        path_qs, method, status, started, finished = "/a", "GET", 200, 1.0, 2.0

    (r,) = from_devserver([Rec()], "http://127.0.0.1:8000")
    assert (r.origin, r.path, r.start, r.end) == ("http://127.0.0.1:8000", "/a", 1.0, 2.0)


def test_command_line_judges_a_log_and_exits_1_on_a_violation(tmp_path, capsys):
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(request_to_json(r) + "\n" for r in [req(0, .1, "/robots.txt"), req(.2, .3, "/private/a")]))
    spec = tmp_path / "spec.json"
    spec.write_text('{"http://127.0.0.2:8000": {"robots": "User-agent: *\\nDisallow: /private/\\n"}}')
    assert main([str(log), "--format", "jsonl", "--spec", str(spec)]) == 1
    out = capsys.readouterr().out
    assert "| 127.0.0.2 | 2 | 1 (1 / 0) |" in out and "disallowed by robots.txt" in out
    spec.write_text('{"http://127.0.0.2:8000": {"robot": ""}}')
    assert main([str(log), "--format", "jsonl", "--spec", str(spec)]) == 2
    assert "origin http://127.0.0.2:8000" in capsys.readouterr().err
