"""The three checkers a user runs to see why a page was or was not crawled (DESIGN 6)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import uvloop

from crawler.config import CrawlerConfig
from crawler.errors import CrawlerError, FetchError, UsageError
from crawler.fetcher.robots import parse_robots
from crawler.parsers.base import ParseResult
from crawler.parsers.dispatch import ParserDispatch, mime_of
from crawler.parsers.sitemap import KINDS as SITEMAP_KINDS
from crawler.protocols.base import PROTOCOLS, Response
from crawler.urls.filters import UrlFilters
from crawler.urls.normalize import InvalidUrl, Normalizer


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from exc


def _outlinks_json(parse: ParseResult) -> list[dict]:
    # Sitemap and feed entries carry lastmod/priority: shown beside url and anchor.
    try:
        extra = json.loads(parse.metadata.get("outlink_metadata") or "{}")
    except ValueError:
        extra = {}
    return [{"url": o.url, "anchor": o.anchor, **extra.get(o.url, {})} for o in parse.outlinks]


def _parse_json(parse: ParseResult, content_type: str | None) -> dict:
    return {
        "title": parse.title,
        "text": parse.text,
        "outlinks": _outlinks_json(parse),
        "robots": {"noindex": parse.noindex, "nofollow": parse.nofollow},
        "canonical": parse.canonical,
        "refresh": parse.refresh,
        "content_type": content_type,
        "status": parse.status,
        "reason": parse.reason,
        "metadata": parse.metadata,
    }


async def _fetch_following(cfg: CrawlerConfig, url: str) -> Response:
    protocol = PROTOCOLS.load(url.split(":", 1)[0])(cfg)
    normalize = Normalizer.from_config(cfg).normalize
    try:
        for _ in range(cfg.http.max_redirects + 1):
            response = await protocol.fetch(url)
            location = response.header("Location")
            if response.status not in (301, 302, 303, 307, 308) or not location:
                return response
            url = normalize(location, base=url)
        return response
    finally:
        await protocol.aclose()


def cmd_parse_check(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    dispatch = ParserDispatch(cfg)
    normalize = Normalizer.from_config(cfg).normalize
    headers: list[tuple[str, str]] = []
    if args.base is not None:
        try:
            base = normalize(args.base)
        except InvalidUrl as exc:
            raise UsageError(f"--base {args.base!r}: {exc}") from exc
        body = _read(args.target)
        content_type = args.content_type
    else:
        try:
            base = normalize(args.target)
        except InvalidUrl as exc:
            raise UsageError(f"{args.target!r}: {exc}") from exc
        try:
            response = uvloop.run(_fetch_following(cfg, base))
        except FetchError as exc:
            raise CrawlerError(f"parse-check: {base}: {exc.kind}: {exc}") from exc
        body, base, content_type = response.body, response.url, response.header("Content-Type")
        headers = response.headers
    parse = dispatch.parse(body, base, content_type, headers=headers)
    # The type the parser was chosen by: the bytes overrule a missing or lying header.
    shown_type = parse.metadata.get("content_type") or mime_of(content_type) or None
    shown = _parse_json(parse, shown_type)
    shown["outlinks_over_cap"] = _over_cap(cfg, parse, base)
    print(json.dumps(shown, ensure_ascii=False))
    return 0


def _over_cap(cfg: CrawlerConfig, parse: ParseResult, base: str) -> int:
    """How many of the outlinks updatedb would not queue because of db.max_outlinks (sitemap.max_urls for a
    sitemap): those past the cap among the ones urls.* and db.ignore_external_links keep, as updatedb counts."""
    cap = cfg.sitemap.max_urls if parse.metadata.get("sitemap") in SITEMAP_KINDS else cfg.db.max_outlinks
    if not cap or len(parse.outlinks) <= cap:
        return 0
    filters = UrlFilters(cfg.urls, ignore_external=cfg.db.ignore_external_links)
    return max(sum(filters.check(o.url, base) is None for o in parse.outlinks) - cap, 0)


def cmd_robots_check(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    rules = parse_robots(_read(args.robots_file))
    lines = _read(args.urls_file).decode("utf-8", errors="replace").splitlines()
    out = []
    for line in lines:
        url = line.strip()
        if not url:
            continue
        out.append(f"{'allowed' if rules.allowed(url, args.agent) else 'denied'}\t{url}")
    if out:
        print("\n".join(out))
    return 0


def cmd_normalize_check(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    normalize = Normalizer.from_config(cfg).normalize  # urls.* and the enabled protocols, not urls.filters
    base = args.base
    if base is not None:
        try:
            base = normalize(base)
        except InvalidUrl as exc:
            raise UsageError(f"--base {args.base!r}: {exc}") from exc
    write = sys.stdout.write
    for raw in sys.stdin:
        line = raw.rstrip("\r\n")
        try:
            if not line.strip() and base is None:
                raise InvalidUrl("empty URL")
            write(normalize(line, base=base) + "\n")
        except InvalidUrl as exc:
            write(f"! {exc}\n")
    sys.stdout.flush()
    return 0
