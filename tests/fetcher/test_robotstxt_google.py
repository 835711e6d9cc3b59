"""`crawler robots-check` against the verdicts of google/robotstxt's robots_test.cc (Google's reference matcher).

Each row is one robots.txt body, one agent and the verdict for each URL, grouped so that one run of the
command checks them all. The test names of robots_test.cc are kept in the row ids. Where a Google test
asserts something other than a verdict (line counts, a helper function), the rows marked "derived" turn
its facts into verdicts. Cases that only Google's extensions decide are left out, each with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.conftest import run_crawler

A, D = "allowed", "denied"


@dataclass(frozen=True)
class Case:
    id: str
    robots: str | bytes
    agent: str
    verdicts: tuple[tuple[str, str], ...]


def case(id: str, robots: str | bytes, agent: str, *verdicts: tuple[str, str]) -> Case:
    return Case(id, robots, agent, verdicts)


FOO = "http://foo.bar"

GROUPS = (
    "allow: /foo/bar/\n"
    "\n"
    "user-agent: FooBot\n"
    "disallow: /\n"
    "allow: /x/\n"
    "user-agent: BarBot\n"
    "disallow: /\n"
    "allow: /y/\n"
    "\n"
    "\n"
    "allow: /w/\n"
    "user-agent: BazBot\n"
    "\n"
    "user-agent: FooBot\n"
    "allow: /z/\n"
    "disallow: /\n"
)

NAME_CASES = {
    "upper": "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
    "lower": "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
    "camel": "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
}
AGENT_VALUE_CASES = {
    "upper": "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
    "lower": "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
    "camel": "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n",
}

# GoogleOnly_LineTooLong builds rules longer than Google's line cap (8 * 2083 bytes).
_CAP = 8 * 2083
_LONG_A = "/x/" + "a" * (_CAP - len("/x/") - len("disallow: ") + 1 - len("/x/"))
_ALLOW_A = "/x/" + "a" * (_CAP - len("/x/") - len("allow: ") + 1 - len("/x/"))

# The files of ID_LinesNumbersAreCountedCorrectly, one per kind of line end.
_LINE_ENDS = {
    "unix": "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /\n",
    "dos": "User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
    "mac": "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
    "no_final_newline": "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /",
    "mixed": "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /",
}

# ID_UTF8ByteOrderMarkIsSkipped's files, their "Allow: /AnyValue" turned into a Disallow so that the verdict
# shows whether the rule was read as part of foo's group (derived).
_BOM_FILES = {
    "full_bom": (b"\xef\xbb\xbf", D),
    "partial_2_bom": (b"\xef\xbb", D),
    "partial_1_bom": (b"\xef", D),
    "broken_bom": (b"\xef\x11\xbf", A),  # the first line is garbage: the Disallow belongs to no group
}


def _docs(allow: str, *verdicts: tuple[str, str]) -> Case:
    return case(f"GoogleOnly_DocumentationChecks[{allow}]", f"user-agent: FooBot\ndisallow: /\nallow: {allow}\n",
                "FooBot", *verdicts)


CASES = [
    # GoogleOnly_SystemTest: left out; an empty agent or an empty URL are conventions of Google's API.
    case("ID_LineSyntax_Line[correct]", "user-agent: FooBot\ndisallow: /\n", "FooBot", (f"{FOO}/x/y", D)),
    case("ID_LineSyntax_Line[incorrect]", "foo: FooBot\nbar: /\n", "FooBot", (f"{FOO}/x/y", A)),
    # ID_LineSyntax_Line[incorrect_accepted] ("disallow /" without a colon): left out, a Google extension.
    case("ID_LineSyntax_Groups[FooBot]", GROUPS, "FooBot",
         (f"{FOO}/x/b", A), (f"{FOO}/z/d", A), (f"{FOO}/y/c", D), (f"{FOO}/foo/bar/", D)),
    case("ID_LineSyntax_Groups[BarBot]", GROUPS, "BarBot",
         (f"{FOO}/y/c", A), (f"{FOO}/w/a", A), (f"{FOO}/z/d", D), (f"{FOO}/foo/bar/", D)),
    case("ID_LineSyntax_Groups[BazBot]", GROUPS, "BazBot", (f"{FOO}/z/d", A), (f"{FOO}/foo/bar/", D)),
    *(case(f"ID_LineSyntax_Groups_OtherRules[{name}][{agent}]",
           f"User-agent: BarBot\n{line}\nUser-agent: *\nDisallow: /\n", agent, (f"{FOO}/", D))
      for name, line in (("sitemap", "Sitemap: https://foo.bar/sitemap"),)
      for agent in ("FooBot", "BarBot")),
    *(case(f"ID_LineSyntax_Groups_OtherRules[unknown][{agent}]",
           "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n", agent, (f"{FOO}/", D))
      for agent in ("FooBot", "BarBot")),
    *(case(f"ID_REPLineNamesCaseInsensitive[{name}]", robots, "FooBot", (f"{FOO}/x/y", A), (f"{FOO}/a/b", D))
      for name, robots in NAME_CASES.items()),
    # ID_VerifyValidUserAgentsToObey: left out; it checks a helper on agent strings, no robots.txt or URL.
    *(case(f"ID_UserAgentValueCaseInsensitive[{name}][{agent}]", robots, agent,
           (f"{FOO}/x/y", A), (f"{FOO}/a/b", D))
      for name, robots in AGENT_VALUE_CASES.items() for agent in ("Foo", "foo")),
    # Google reads a user-agent value up to its first space; the layer does too (RFC 9309 leaves it open).
    *(case(f"GoogleOnly_AcceptUserAgentUpToFirstSpace[{agent}]",
           "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n", agent, (f"{FOO}/x/y", verdict))
      for agent, verdict in (("Foo", A), ("Foo Bar", D))),
    case("ID_GlobalGroups_Secondary[empty]", "", "FooBot", (f"{FOO}/x/y", A)),
    *(case(f"ID_GlobalGroups_Secondary[global][{agent}]",
           "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n", agent, (f"{FOO}/x/y", verdict))
      for agent, verdict in (("FooBot", D), ("BarBot", A))),
    case("ID_GlobalGroups_Secondary[only_specific]",
         "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n",
         "QuxBot", (f"{FOO}/x/y", A)),
    case("ID_AllowDisallow_Value_CaseSensitive[lower]", "user-agent: FooBot\ndisallow: /x/\n", "FooBot",
         (f"{FOO}/x/y", D)),
    case("ID_AllowDisallow_Value_CaseSensitive[upper]", "user-agent: FooBot\ndisallow: /X/\n", "FooBot",
         (f"{FOO}/x/y", A)),
    case("ID_LongestMatch[1]", "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n", "FooBot",
         (f"{FOO}/x/page.html", D)),
    case("ID_LongestMatch[2]", "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n", "FooBot",
         (f"{FOO}/x/page.html", A), (f"{FOO}/x/", D)),
    case("ID_LongestMatch[3]", "user-agent: FooBot\ndisallow: \nallow: \n", "FooBot", (f"{FOO}/x/page.html", A)),
    case("ID_LongestMatch[4]", "user-agent: FooBot\ndisallow: /\nallow: /\n", "FooBot", (f"{FOO}/x/page.html", A)),
    case("ID_LongestMatch[5]", "user-agent: FooBot\ndisallow: /x\nallow: /x/\n", "FooBot",
         (f"{FOO}/x", D), (f"{FOO}/x/", A)),
    case("ID_LongestMatch[6]", "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n", "FooBot",
         (f"{FOO}/x/page.html", A)),
    case("ID_LongestMatch[7]", "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n", "FooBot",
         (f"{FOO}/page.html", D), (f"{FOO}/page", A)),
    case("ID_LongestMatch[8]", "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n", "FooBot",
         (f"{FOO}/x/page.html", A), (f"{FOO}/x/y.html", D)),
    case("ID_LongestMatch[9]", "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n", "FooBot",
         (f"{FOO}/x/page", A), (f"{FOO}/y/page", D)),
    case("ID_Encoding[query]",
         "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n", "FooBot",
         (f"{FOO}/foo/bar?qux=taz&baz=http://foo.bar?tar&par", A)),
    # ID_Encoding[raw/encoded 3-byte character]: the URL written with a raw "ツ" is left out. Google leaves its
    # encoding to the caller and denies it; RFC 9309 2.2.2 percent-encodes the URL before comparing, so it matches.
    case("ID_Encoding[raw_3_byte_character]", "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n", "FooBot",
         (f"{FOO}/foo/bar/%E3%83%84", A)),
    case("ID_Encoding[encoded_3_byte_character]", "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
         "FooBot", (f"{FOO}/foo/bar/%E3%83%84", A)),
    # ID_Encoding[encoded_unreserved]: /foo/bar/baz is left out. Google denies it, RFC 9309 2.2.2's table
    # decodes "%62%61%7A" to "baz" before comparing, so it is allowed here.
    case("ID_Encoding[encoded_unreserved]", "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n", "FooBot",
         (f"{FOO}/foo/bar/%62%61%7A", A)),
    case("ID_SpecialCharacters[asterisk]", "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
         "FooBot", (f"{FOO}/foo/bar/quz", D), (f"{FOO}/foo/quz", A), (f"{FOO}/foo//quz", A),
         (f"{FOO}/foo/bax/quz", A)),
    case("ID_SpecialCharacters[dollar]", "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n", "FooBot",
         (f"{FOO}/foo/bar", D), (f"{FOO}/foo/bar/qux", A), (f"{FOO}/foo/bar/", A), (f"{FOO}/foo/bar/baz", A)),
    case("ID_SpecialCharacters[comment]", "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
         "FooBot", (f"{FOO}/foo/bar", A), (f"{FOO}/foo/quz", D)),
    # GoogleOnly_IndexHTMLisDirectory: /allowed-slash/ is left out; that "index.html" stands for its directory is
    # Google's (Protego does it too), RFC 9309 alone would deny it. The other three URLs RFC 9309 decides.
    case("GoogleOnly_IndexHTMLisDirectory", "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
         "foobot", ("http://foo.com/allowed-slash/index.htm", D), ("http://foo.com/allowed-slash/index.html", A),
         ("http://foo.com/anyother-url", D)),
    # GoogleOnly_LineTooLong: the URLs that only match a rule cut at Google's line cap are left out (RFC 9309 has
    # no cap on a line); the ones that do not depend on the cap are kept, and (derived) the long disallow rule
    # still denies its own full path, which both readings agree on.
    case("GoogleOnly_LineTooLong[disallow]", f"user-agent: FooBot\ndisallow: {_LONG_A}/qux\n", "FooBot",
         (f"{FOO}/fux", A), (f"{FOO}{_LONG_A}/qux", D)),
    case("GoogleOnly_LineTooLong[allow]",
         f"user-agent: FooBot\ndisallow: /\nallow: {_ALLOW_A}/qux\nallow: {_ALLOW_A.replace('a', 'b')}/qux\n",
         "FooBot", (f"{FOO}/", D), (f"{FOO}{_ALLOW_A}/qux", A)),
    _docs("/fish", (f"{FOO}/bar", D), (f"{FOO}/fish", A), (f"{FOO}/fish.html", A), (f"{FOO}/fish/salmon.html", A),
          (f"{FOO}/fishheads", A), (f"{FOO}/fishheads/yummy.html", A), (f"{FOO}/fish.html?id=anything", A),
          (f"{FOO}/Fish.asp", D), (f"{FOO}/catfish", D), (f"{FOO}/?id=fish", D)),
    _docs("/fish*", (f"{FOO}/bar", D), (f"{FOO}/fish", A), (f"{FOO}/fish.html", A), (f"{FOO}/fish/salmon.html", A),
          (f"{FOO}/fishheads", A), (f"{FOO}/fishheads/yummy.html", A), (f"{FOO}/fish.html?id=anything", A),
          (f"{FOO}/Fish.bar", D), (f"{FOO}/catfish", D), (f"{FOO}/?id=fish", D)),
    _docs("/fish/", (f"{FOO}/bar", D), (f"{FOO}/fish/", A), (f"{FOO}/fish/salmon", A), (f"{FOO}/fish/?salmon", A),
          (f"{FOO}/fish/salmon.html", A), (f"{FOO}/fish/?id=anything", A), (f"{FOO}/fish", D),
          (f"{FOO}/fish.html", D), (f"{FOO}/Fish/Salmon.html", D)),
    _docs("/*.php", (f"{FOO}/bar", D), (f"{FOO}/filename.php", A), (f"{FOO}/folder/filename.php", A),
          (f"{FOO}/folder/filename.php?parameters", A), (f"{FOO}//folder/any.php.file.html", A),
          (f"{FOO}/filename.php/", A), (f"{FOO}/index?f=filename.php/", A), (f"{FOO}/php/", D),
          (f"{FOO}/index?php", D), (f"{FOO}/windows.PHP", D)),
    _docs("/*.php$", (f"{FOO}/bar", D), (f"{FOO}/filename.php", A), (f"{FOO}/folder/filename.php", A),
          (f"{FOO}/filename.php?parameters", D), (f"{FOO}/filename.php/", D), (f"{FOO}/filename.php5", D),
          (f"{FOO}/php/", D), (f"{FOO}/filename?php", D), (f"{FOO}/aaaphpaaa", D), (f"{FOO}//windows.PHP", D)),
    _docs("/fish*.php", (f"{FOO}/bar", D), (f"{FOO}/fish.php", A), (f"{FOO}/fishheads/catfish.php?parameters", A),
          (f"{FOO}/Fish.PHP", D)),
    case("GoogleOnly_DocumentationChecks[precedence_p]", "user-agent: FooBot\nallow: /p\ndisallow: /\n", "FooBot",
         ("http://example.com/page", A)),
    case("GoogleOnly_DocumentationChecks[precedence_folder]", "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
         "FooBot", ("http://example.com/folder/page", A)),
    case("GoogleOnly_DocumentationChecks[precedence_htm]", "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
         "FooBot", ("http://example.com/page.htm", D)),
    case("GoogleOnly_DocumentationChecks[precedence_dollar]", "user-agent: FooBot\nallow: /$\ndisallow: /\n",
         "FooBot", ("http://example.com/", A), ("http://example.com/page.html", D)),
    # ID_LinesNumbersAreCountedCorrectly (derived): every kind of line end ends a line, bar's Disallow is read.
    *(case(f"ID_LinesNumbersAreCountedCorrectly[{name}][{agent}]", robots, agent, (f"{FOO}/some/path", verdict))
      for name, robots in _LINE_ENDS.items() for agent, verdict in (("foo", A), ("bar", D))),
    # ID_UTF8ByteOrderMarkIsSkipped (derived), see _BOM_FILES; a BOM only counts at the very start of the file.
    *(case(f"ID_UTF8ByteOrderMarkIsSkipped[{name}]", bom + b"User-Agent: foo\nDisallow: /AnyValue\n", "foo",
           (f"{FOO}/AnyValue", verdict))
      for name, (bom, verdict) in _BOM_FILES.items()),
    case("ID_UTF8ByteOrderMarkIsSkipped[bom_in_middle]", b"User-Agent: foo\n\xef\xbb\xbfDisallow: /AnyValue\n", "foo",
         (f"{FOO}/AnyValue", A)),
    # ID_NonStandardLineExample_Sitemap: no verdict to check; tests/fetcher/test_robotstxt.py keeps the sitemaps.
    # TestGetPathParamsQuery (derived): what a URL's rules match against, its path and query without the fragment.
    # The scheme-less forms are left out: robots-check takes absolute URLs.
    case("TestGetPathParamsQuery", "user-agent: FooBot\ndisallow: /$\ndisallow: /a/b?c=d&e=f$\n"
         "disallow: /a/b?c=http://d.e/$\ndisallow: /a/$\n", "FooBot",
         ("http://www.example.com", D), ("http://www.example.com/", D), ("http://www.example.com/a", A),
         ("http://www.example.com/a/", D), ("http://www.example.com/a/b?c=http://d.e/", D),
         ("http://www.example.com/a/b?c=d&e=f#fragment", D), ("http://www.example.com/a/b?c=d", A)),
    # TestMaybeEscapePattern (derived): a rule's non-ASCII is percent-encoded and its escapes compare as one
    # spelling, whatever the case of their hex digits; a different byte is a different byte.
    case("TestMaybeEscapePattern", "user-agent: FooBot\ndisallow: /á\ndisallow: /%aa\n", "FooBot",
         (f"{FOO}/%C3%A1", D), (f"{FOO}/%AA", D), (f"{FOO}/%aa", D), (f"{FOO}/%BB", A), (f"{FOO}/a", A)),
]


@pytest.mark.parametrize("row", CASES, ids=[c.id for c in CASES])
async def test_robots_check_agrees_with_google(tmp_path, row: Case):
    """One run of `crawler robots-check` prints Google's verdict for every URL of the row, in input order."""
    robots = tmp_path / "robots.txt"
    robots.write_bytes(row.robots if isinstance(row.robots, bytes) else row.robots.encode())
    urls = tmp_path / "urls.txt"
    urls.write_text("".join(f"{url}\n" for url, _ in row.verdicts))
    result = await run_crawler("robots-check", str(robots), str(urls), "--agent", row.agent)
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines() == [f"{verdict}\t{url}" for url, verdict in row.verdicts]
