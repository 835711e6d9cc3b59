"""A fetched page's parse, for its fetch: in the parse pool's processes, or in the fetch's own.

robots.txt ``Sitemap:`` lines reach updatedb as outlinks of their host's first
page that parses: they are taken off the origin's rules then, and put back if
that page did not parse.
"""

from __future__ import annotations

from concurrent.futures.process import BrokenProcessPool
from typing import Any

from crawler.errors import CrawlerError
from crawler.fetcher.parsepool import PageAnswer, ParsePool, parse_to_rows
from crawler.fetcher.records import add_robots_sitemaps, body_digest
from crawler.fetcher.robots import RobotsRules
from crawler.parsers.dispatch import ParserDispatch
from crawler.protocols.base import Response
from crawler.statuses import FetchStatus

Rows = tuple[dict[str, Any] | None, dict[str, Any] | None]  # (parse_text, parse_data) rows, None if none


def parse_here(parsers: ParserDispatch, url: str, response: Response, rules: RobotsRules, log: Any) -> Rows:
    """Parse a successful page in this process (no parse pool); a parser's error is logged, not raised."""
    try:
        parse_text, parse_data, parse_status = parse_to_rows(parsers, response.body, url,
                                                             response.header("Content-Type"))
    except CrawlerError as exc:
        log.warning("parse.error", error=str(exc))
        return None, None
    if parse_status == "success" and rules.sitemaps:
        add_robots_sitemaps(parse_data, rules.sitemaps)
        rules.sitemaps = []
    return parse_text, parse_data


async def parse_in_pool(pool: ParsePool, url: str, response: Response, rules: RobotsRules, row: dict[str, Any],
                        log: Any, links: bool = False) -> PageAnswer | None:
    """Hand the page to the parse pool (parsed and digested if a success): its answer (WARC records, parse
    rows and, with ``links``, its same-origin outlinks), or None if the pool failed (logged: the page is
    then archived from its response, without parse rows). Sets the row's digest."""
    parse = row["status"] == FetchStatus.SUCCESS
    # Taken now, not once parsed: the host's next page may reach the pool before this one answers.
    sitemaps, rules.sitemaps = (rules.sitemaps, []) if parse else ([], rules.sitemaps)
    answer: PageAnswer | None = None
    try:
        answer = await pool.page(url, response, response.header("Content-Type"), parse, sitemaps, links and parse)
    except BrokenProcessPool as exc:
        error, digest = str(exc), body_digest(response.body) if parse else None
    else:
        error, digest = answer.error, answer.digest
    if error is not None:
        log.warning("parse.error", error=error)
    row["digest"] = digest
    if (answer is None or answer.status != "success") and sitemaps:
        rules.sitemaps = sitemaps + rules.sitemaps  # for the host's next parsed page
    return answer
