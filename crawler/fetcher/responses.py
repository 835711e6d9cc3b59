"""What a fetched response becomes: its fetch status, its row, its parse, and the redirect hop it leads to.

A 3xx with a Location is followed one hop at a time (crawler/fetcher/redirects.py):
the hop is a new entry, pushed into its host's queue before the response's own
entry is released, so the dispatcher cannot finish in between. ``answer`` makes
the row and queues the hop; the fetcher then releases the entry's queue (parsing
is not a request) before ``keep`` parses and records the page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crawler.fetcher.follow import Follower
from crawler.fetcher.hostqueue import FetchQueues
from crawler.fetcher.outcome import status_for_http
from crawler.fetcher.outlinks import same_origin_links
from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.parsing import parse_here, parse_in_pool
from crawler.fetcher.progress import Counters
from crawler.fetcher.queuekey import QueueKey
from crawler.fetcher.records import fetch_row
from crawler.fetcher.redirects import RedirectPolicy
from crawler.fetcher.robots import RobotsRules
from crawler.parsers.dispatch import ParserDispatch
from crawler.protocols.base import Response
from crawler.statuses import FetchStatus
from crawler.urls.normalize import InvalidUrl


class Responses:
    def __init__(self, redirects: RedirectPolicy, parse_pool: ParsePool | None, parsers: ParserDispatch | None,
                 record: Callable[..., None], queues: FetchQueues, queue_key: QueueKey, follower: Follower,
                 log: Any) -> None:
        self.redirects = redirects
        self.follower = follower
        self.parse_pool = parse_pool  # parse in its processes, or
        self.parsers = parsers  # in this one (None if neither: fetcher.parse is off)
        self.record = record
        self.queues = queues
        self.queue_key = queue_key
        self.log = log

    async def answer(self, entry: dict[str, Any], response: Response) -> dict[str, Any]:
        """The response's fetch row (status, reason, redirect), its redirect hop (if any) queued: after this
        the entry's queue may be released, so the host's next request overlaps this page's parse."""
        # Only a 3xx's outcome depends on its Location (a header lookup scans every header).
        location = response.header("Location") if 300 <= response.status < 400 else None
        status = status_for_http(response.status, bool(location))
        redirect = None
        reason = f"{response.status} {response.reason}".strip()
        hop = None
        if status in (FetchStatus.REDIRECT_PERM, FetchStatus.REDIRECT_TEMP):
            try:
                redirect = self.redirects.target(location, entry["url"])
            except InvalidUrl as exc:
                status, reason = FetchStatus.GONE, f"redirect to an invalid URL: {exc}"
            else:
                hop, not_followed = self.redirects.hop(entry, redirect)
                if hop is None:
                    reason += f"; not followed: {not_followed}"
        row = fetch_row(entry, status, reason=reason, response=response, redirect_url=redirect,
                        digest=self.parse_pool is None)
        if hop is not None:
            # Pushed before this entry's queue is released, so the dispatcher cannot finish in between.
            self.queues.push(await self.queue_key.key(hop["host"]), hop)
        return row

    def use_pool(self, start: Callable[[], ParsePool], counters: Counters) -> Callable[[], ParsePool] | None:
        """Start the parse pool (a fetch grown large), and parse the rest of the fetch in it once its
        processes have done their imports (till then pages parse here, so nothing waits for them): None
        when in use, else ``start`` to be called again."""
        pool = start()
        if not pool.ready():
            return start
        self.parse_pool = pool
        self.log.info("fetch.parse_pool", processes=pool.processes, fetched=counters.fetched)
        return None

    async def keep(self, entry: dict[str, Any], response: Response, rules: RobotsRules, row: dict[str, Any],
                   queue: str) -> None:
        """Parse the page (in the pool, or here), queue the outlinks it follows into ``queue`` (its own
        host's), and record it with its row."""
        parse_text = parse_data = archived = None
        follower = self.follower
        links: list[str] = []
        wants_links = row["status"] == FetchStatus.SUCCESS and follower.wants_links(entry)
        if self.parse_pool is not None:
            answer = await parse_in_pool(self.parse_pool, entry["url"], response, rules, row, self.log, wants_links)
            if answer is not None:
                archived, parse_text, parse_data = answer.archived, answer.parse_text, answer.parse_data
                links = answer.links
        elif row["status"] == FetchStatus.SUCCESS and self.parsers is not None:
            parse_text, parse_data = parse_here(self.parsers, entry["url"], response, rules, self.log)
            if wants_links and parse_data is not None and parse_data["parse_status"] == "success":
                links = same_origin_links(parse_data["outlinks"], entry["url"], follower.max_outlinks)
        if links:
            queues = self.queues
            # Pushed before this entry's worker is released, so the dispatcher cannot finish in between.
            for followed in follower.follow(entry, row["digest"], links, queues.follow_room()):
                queues.push(queue, followed)
        self.record(entry, row, response, parse_text, parse_data, archived=archived)
