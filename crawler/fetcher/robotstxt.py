"""Protego, with the places where it departs from RFC 9309 set right around it.

Protego does the matching (longest match, allow wins ties, ``*`` and ``$``, percent-encoding). What it gets
wrong is fixed here, checked against google/robotstxt's test cases (tests/fetcher/test_robotstxt_google.py):

- A UTF-8 byte order mark (or the start of one) at the head of the file is skipped; Protego read the first
  line as an unknown record.
- Only user-agent, allow and disallow lines shape groups (RFC 9309 2.2.4: other records "MUST NOT interfere").
  Protego let any other line (an unknown one, Crawl-delay) between two user-agent lines end the group, so
  ``User-agent: a`` / ``Foo: x`` / ``User-agent: *`` / ``Disallow: /`` left ``a`` with no rules. Unknown
  lines are dropped (they have no other effect in Protego). A Crawl-delay (Request-rate, Visit-time) among
  user-agent lines still applies to the agents named just before it, as the site owner meant and Protego
  read it: it is moved into a group of its own for them, after the group it stood in.
- A user-agent line names its product token: the leading letters, ``_`` and ``-`` of the value, as Google
  reads it (``Foo Bar`` and ``foo/1.0`` name ``foo``). The agent asking matches a group only when equal to
  that token, case aside (RFC 9309 2.2.1); Protego also matched a group named by any prefix of the agent at
  a word start (``User-agent: c`` ruled ``crawler``).
- A percent-escape that is not part of a UTF-8 sequence stays that byte: Protego decoded every such byte to
  U+FFFD, so ``Disallow: /%E9`` also denied ``/%FF``. Its ``%`` is escaped (``%25E9``), which Protego keeps
  as it is, on both sides of the comparison.
- Lines end at CR, LF or CRLF only, and a rule value keeps every byte: raw bytes outside printable ASCII
  are percent-encoded before Protego sees them, so that neither its Unicode ``splitlines``/``strip`` nor its
  UTF-8 decoding (a raw Latin-1 byte became U+FFFD) changes the pattern.

This relies on Protego internals (``_extract_directive``, the directive name sets, ``_user_agents``), so
pyproject.toml pins the minor version these fixes were written against.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from protego import Protego
from protego._protego import (
    _ALLOW_DIRECTIVE,
    _CRAWL_DELAY_DIRECTIVE,
    _DISALLOW_DIRECTIVE,
    _REQUEST_RATE_DIRECTIVE,
    _SITE_WIDE_DIRECTIVES,
    _USER_AGENT_DIRECTIVE,
    _VISIT_TIME_DIRECTIVE,
    _extract_directive,
)

if TYPE_CHECKING:
    from protego._ruleset import _RuleSet

_RULE_DIRECTIVES = _ALLOW_DIRECTIVE | _DISALLOW_DIRECTIVE
# Records Protego keeps per group although RFC 9309 does not define them.
_GROUP_EXTRAS = _CRAWL_DELAY_DIRECTIVE | _REQUEST_RATE_DIRECTIVE | _VISIT_TIME_DIRECTIVE
# A full byte order mark, or the first one or two of its bytes (google/robotstxt accepts those too).
_BOMS = (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef")
_EOL = re.compile(r"\r\n|\r|\n")
_TOKEN = re.compile(r"[A-Za-z_-]*")
_ESCAPE_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
# Characters str.splitlines() breaks at besides CR and LF: a value holding one would reach Protego as two lines.
_LINE_BREAKERS = frozenset("\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def parse_robotstxt(body: bytes) -> RobotsTxt:
    """Parse a robots.txt body as served (bytes, any encoding errors kept as the bytes they were)."""
    for bom in _BOMS:
        if body.startswith(bom):
            body = body[len(bom):]
            break
    return RobotsTxt.parse(body.decode("utf-8", errors="surrogateescape"))


class RobotsTxt(Protego):
    """A Protego parser that reads groups, agents and escapes as RFC 9309 does (module docstring)."""

    def _parse_robotstxt(self, content: str) -> None:
        super()._parse_robotstxt(_canonical(content.removeprefix("\ufeff")))

    def can_fetch(self, url: str, user_agent: str) -> bool:
        return super().can_fetch(_guard_escapes(url), user_agent)

    def _get_matching_rule_set(self, user_agent: str) -> _RuleSet | None:
        try:
            return self._matched_rule_set[user_agent]
        except KeyError:
            pass
        rules = self._user_agents.get(user_agent.strip().lower()) or self._user_agents.get("*")
        self._matched_rule_set[user_agent] = rules
        return rules


def _canonical(text: str) -> str:
    """The records of ``text`` one per line as Protego reads them, with the fixes of the module docstring."""
    out: list[str] = []
    # Crawl-delay and the like met among user-agent lines, each with the agents named just before it:
    # emitted as groups of their own once the group they stood in is over.
    pending: list[tuple[list[str], str]] = []
    recent: list[str] = []  # the user-agent tokens since the last other record
    last = ""  # "agent", "extra" (a group's own other record among its user-agent lines), "rule" or ""
    for line in _EOL.split(text):
        line = line.split("#", 1)[0].strip(" \t\v\f")
        parsed = _extract_directive(line) if line else None
        if parsed is None:
            continue  # blank, a comment, or no record at all: Protego skips it too
        field, value = parsed
        if field in _USER_AGENT_DIRECTIVE:
            if last not in ("agent", "extra"):
                _flush(pending, out)  # a new group starts
            if last != "agent":
                recent = []
            token = _product_token(value)
            recent.append(token)
            out.append(f"user-agent: {token}")
            last = "agent"
        elif field in _RULE_DIRECTIVES:
            out.append(f"{field}: {_guard_escapes(_encode_pattern(value))}")
            last = "rule"
        elif field in _GROUP_EXTRAS:
            record = f"{field}: {_printable(value)}"
            if last in ("agent", "extra"):
                pending.append((recent, record))
                last = "extra"
            else:
                out.append(record)
        elif field in _SITE_WIDE_DIRECTIVES:
            out.append(f"{field}: {_printable(value)}")  # Protego lets these shape no group
        # Any other record has no effect on Protego but ending a group: it is dropped.
    _flush(pending, out)
    return "\n".join(out)


def _flush(pending: list[tuple[list[str], str]], out: list[str]) -> None:
    for tokens, record in pending:
        if any(tokens):
            out.extend(f"user-agent: {token}" for token in tokens)
            out.append(record)
    pending.clear()


def _product_token(value: str) -> str:
    # "*" stays the catch-all, also when words follow it (Google reads "* bot" so); "*bot" names nobody.
    if value == "*" or (value.startswith("*") and value[1:2].isspace()):
        return "*"
    token = _TOKEN.match(value)
    return token.group() if token else ""


def _encode_pattern(value: str) -> str:
    """Percent-encode every byte outside printable ASCII, raw invalid UTF-8 (surrogate escapes) included."""
    if value.isascii() and value.isprintable() and " " not in value:
        return value
    return "".join(ch if "!" <= ch <= "~" else _escaped(ch) for ch in value)


def _printable(value: str) -> str:
    """A value that is not a pattern (Sitemap, Crawl-delay), kept on one line and encodable."""
    if value.isascii():
        return "".join(_escaped(ch) if ch in _LINE_BREAKERS else ch for ch in value)
    return "".join(_escaped(ch) if ch in _LINE_BREAKERS or "\udc80" <= ch <= "\udcff" else ch for ch in value)


def _escaped(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8", errors="surrogateescape"))


def _guard_escapes(text: str) -> str:
    """Turn each escape of a byte that is no part of a UTF-8 sequence into an escaped ``%`` (``%E9`` ->
    ``%25E9``), so that Protego keeps it instead of decoding it to U+FFFD. (A URL spelling out ``%25E9``
    itself, a literal "%E9", then compares equal to it: the lesser harm.)"""
    if "%" not in text:
        return text
    return _ESCAPE_RUN.sub(_guard_run, text)


def _guard_run(match: re.Match[str]) -> str:
    run = match.group()
    raw = bytes.fromhex(run.replace("%", ""))
    try:
        raw.decode("utf-8")
        return run
    except UnicodeDecodeError:
        pass
    out = []
    for ch in raw.decode("utf-8", errors="surrogateescape"):
        out.append(f"%25{ord(ch) - 0xDC00:02X}" if "\udc80" <= ch <= "\udcff" else _escaped(ch))
    return "".join(out)
