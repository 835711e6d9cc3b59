"""Spider traps beyond regex: content that repeats at many paths of one host (``traps.*`` in config.yaml).

A spider trap serves one page (or nearly one) at endless paths, each linking to
more of them (``/t/`` links ``next/``, ``a/``, ``b/``: ``/t/a/next/b/``...), so
the number of URLs triples each round while no new content is found. URL rules
(``urls.max_segment_repeats``, ``urls.max_path_depth``) stop it only thousands
of URLs deep. Two defences here look at what the pages *are*, and are built so
that no page with content of its own is lost:

- **Duplicate pages are not followed** (updatedb, ``traps.skip_duplicate_outlinks``).
  A page fetched now whose content digest equals that of another fetched URL of
  the same host ranked before it (shorter URL, then first in sort order), that
  lies in that URL's folder or below, and that a page of the same digest linked
  to, has its outlinks left out: no new webdb URLs, no links rows, no score
  handed on. The page itself is recorded as usual. Its links are the other
  page's links resolved from a deeper base: the same URLs, or the trap's
  relative variants. The folder condition keeps mirrored trees (``/v1/`` and
  ``/v2/`` with the same index but their own pages) followed, the link
  condition identical pages that others link to in nested folders (Boost's
  ``libs/*/index.html`` redirect stubs, each leading into its own folder).
- **A per-host novelty budget** (updatedb decides, generate obeys). A page
  *repeats* when its parent, the same page one folder up (``/t/a/`` of
  ``/t/a/next/``, ``/t/page.html`` of ``/t/sub/page.html``), has the same
  digest or a SimHash within ``traps.simhash_distance`` bits: in a trap every
  page is its parent's page again. A trap starts at a folder whose page is repeated below
  it but does not itself repeat its parent (the root and real pages do not).
  When, among the host's latest ``traps.window`` fetched pages, at least
  ``traps.min_repeats`` below such a folder repeat and they are at least
  ``traps.repeat_ratio`` of the window's pages below it, the folder is a
  suspected trap: ``host.trap_suspected`` is logged, the (host, prefix) is kept
  in the webdb's meta.json (``traps``; every later version carries it, as inject
  and dedup copy meta.json), and generate selects no *unfetched* URL below the
  prefix whose parent repeats its own parent: the trap's growth. A real page
  below it (whose parent is no repeat, or unknown) is still selected, so a
  site serving its home page at every path (a trap at '/') keeps its real
  pages; pages already fetched there are still refetched when due.

SimHash (Charikar): 64 bits, each the majority vote of that bit over hashed
features of the page's text. Features are the 16 bytes starting at each word
of ``parse_text`` (word-anchored shingles of two or three words), mixed with
MurmurHash3's finalizer; long texts keep a hash-chosen sample of about 512 of
them, so near-duplicates keep the same sample and the cost stays flat (the
first 64 KiB of text are read). It is computed at updatedb, not in the parse
step, which is the fetcher's hot path: in numpy, over a batch of texts at once
(``simhashes``), ~39 us a page on the real-site trees against ~76 us one text at
a time, and 429 us to parse a 30 kB page (bench/bench_simhash.py, on this shared
2-core machine); DuckDB SQL over 3-word shingles took 20 ms, and PyPI's
``simhash`` (pure Python) 13.5 ms. updatedb runs it in a thread while its first
statements run in DuckDB. The webdb's ``simhash`` column (signed
64-bit) serves any near-duplicate query too (``dedup`` still goes by digest):
pages whose simhashes differ in at most 3 bits are near-duplicates.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from crawler.config import CrawlerConfig
from crawler.errors import SegmentError
from crawler.jobs.sql import sql_string
from crawler.models import PAGES, DbStatus, FetchStatus
from crawler.urls.filters import _PATH_SQL

MAX_TEXT_BYTES = 64 * 1024
_PAD = 24  # zero bytes after each text in simhashes' buffer: a feature reads 16 bytes from a word's start
_CHUNK_BYTES = 256 * 1024  # text a simhashes pass takes at once (whole texts; one longer text alone)
_SAMPLE = 512  # features kept from a long text: enough votes per bit, a flat cost
_FETCHED = (DbStatus.FETCHED, DbStatus.NOTMODIFIED, DbStatus.DUPLICATE)
SIGNATURES = pa.schema([("segment", pa.string()), ("url", pa.string()), ("simhash", pa.int64())])


def dir_sql(url: str) -> str:
    """The folder of a URL: everything up to the last '/' before any query ('http://h/a/b.html?x' -> 'http://h/a/')."""
    return f"regexp_extract({url}, '^[^?#]*/', 0)"


def simhash(text: str | None) -> int | None:
    """The 64-bit SimHash of ``text`` as a signed integer (Parquet int64), or None for an empty text."""
    data = None if text is None else text.encode("utf-8", "replace")  # a lone surrogate counts as "?"
    return simhashes(pa.array([data], pa.binary()))[0].as_py()


def simhashes(texts: pa.Array) -> pa.Array:
    """``simhash`` of each text of a string column, as int64 (null for a null or empty text).

    One numpy pass over many texts at once, read from the column's own buffers: per text, ~25 numpy
    calls on a few kB cost more in call overhead than in work (~50 us a page on the real-site trees).
    A pass takes texts up to ``_CHUNK_BYTES``: its arrays hold ~50 bytes per byte of text (a word start
    and its owner, gathers, masks); passes of 200 of bench/realweb.py's ~30 kB texts peaked 93 MB
    higher, against 21 one text at a time.
    """
    import numpy as np  # only updatedb needs it: the fetch and parse processes never import numpy for this

    if not (pa.types.is_string(texts.type) or pa.types.is_binary(texts.type)):  # the same buffers
        texts = texts.cast(pa.string())  # large_string or string_view from another engine
    count = len(texts)
    if not count:
        return pa.nulls(0, pa.int64())
    ends = np.frombuffer(texts.buffers()[1], np.int32, count + 1, texts.offset * 4)
    used = np.cumsum(np.minimum(np.diff(ends), MAX_TEXT_BYTES))
    cuts = [0]
    while cuts[-1] < count:  # each chunk: whole texts up to _CHUNK_BYTES, at least one
        limit = (used[cuts[-1] - 1] if cuts[-1] else 0) + _CHUNK_BYTES
        cuts.append(max(cuts[-1] + 1, int(np.searchsorted(used, limit, "right"))))
    chunks = [_simhash_chunk(np, texts.slice(a, b - a)) for a, b in itertools.pairwise(cuts)]
    return chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)


def _simhash_chunk(np: Any, texts: pa.Array) -> pa.Array:
    """``simhashes`` of texts that fit one pass."""
    count = len(texts)
    ends = np.frombuffer(texts.buffers()[1], np.int32, count + 1, texts.offset * 4).astype(np.int64)
    lengths = np.minimum(ends[1:] - ends[:-1], MAX_TEXT_BYTES)
    data = np.frombuffer(texts.buffers()[2] or b"", np.uint8)
    if texts.null_count:  # a null text's bytes (if any) are not a text
        present = np.unpackbits(np.frombuffer(texts.buffers()[0], np.uint8), bitorder="little")
        lengths[present[texts.offset:texts.offset + count] == 0] = 0
    # Each text with 24 zero bytes after it: the 16-byte feature at a word near its end reads zeros, as a
    # text alone would, never the next text.
    spans = lengths + _PAD
    at = np.zeros(count + 1, np.int64)
    np.cumsum(spans, out=at[1:])
    buf = np.zeros(int(at[-1]) + 8, np.uint8)
    for i in np.flatnonzero(lengths).tolist():
        buf[at[i]:at[i] + lengths[i]] = data[ends[i]:ends[i] + lengths[i]]
    windows = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))  # every 8 bytes as one uint64
    # Word starts: each text's first byte, and every byte after a space that is still in the text (a text
    # ending in a space would start a word on its first zero byte; the zeros hold no space).
    starting = np.zeros(len(buf), bool)
    starting[1:] = buf[:-1] == 32
    starting[at[:-1] + lengths] = False
    starting[at[:-1][lengths > 0]] = True
    starts = np.flatnonzero(starting)
    # Words per text from the word starts (sorted), by a binary search per text: summing the bool array over
    # every byte of the pass (np.add.reduceat) cost the SimHashes 6-7 % more (docs/benchmarks.md).
    per_text = np.diff(np.searchsorted(starts, at))
    owner = np.repeat(np.arange(count), per_text)
    with np.errstate(over="ignore"):
        # A long text keeps the words whose first 8 bytes hash below a bound: the same words in near-duplicate
        # texts, about _SAMPLE of them, and only those get the full feature hash; none kept, it keeps them all.
        long = np.flatnonzero(per_text > 2 * _SAMPLE)
        if len(long):
            # Kept: a hash at most its text's bound, the largest value for a text that keeps every word. The
            # bounds repeated text by text (owner is grouped), not gathered: these are the pass's largest arrays.
            bound = np.full(count, np.iinfo(np.uint64).max, np.uint64)
            bound[long] = [(1 << 64) // (n // _SAMPLE) - 1 for n in per_text[long].tolist()]
            keep = windows[starts] * np.uint64(0xD6E8FEB86659FD93) <= np.repeat(bound, per_text)
            kept_starts, kept_owner = starts[keep], owner[keep]
            none_kept = np.bincount(kept_owner, minlength=count) == 0
            if none_kept[long].any():  # one word repeated throughout: all or none of its words pass
                keep |= none_kept[owner]
                kept_starts, kept_owner = starts[keep], owner[keep]
            starts, owner = kept_starts, kept_owner
        x = _fmix(np, windows[starts] ^ (windows[starts + 8] * np.uint64(0x9E3779B97F4A7C15)))
    # Each distinct feature votes once: a phrase a template repeats 60 times must not outvote the text.
    # Features are grouped by text already (starts are in order): each group is sorted in place.
    bounds = np.zeros(count + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=count), out=bounds[1:])
    for i in np.flatnonzero(np.diff(bounds) > 1).tolist():
        x[bounds[i]:bounds[i + 1]].sort()
    first = np.ones(len(x), bool)
    first[1:] = (x[1:] != x[:-1]) | (owner[1:] != owner[:-1])
    x, owner = x[first], owner[first]
    features = np.bincount(owner, minlength=count)
    # Bit votes from one histogram of the features' bytes per text (byte j holds bits 8j..8j+7): a bincount
    # and a small product instead of unpacking 64 bits per feature.
    bins = x.view(np.uint8).reshape(-1, 8).astype(np.intp)
    bins += _byte_offsets(np)
    bins += (owner * 2048)[:, None]
    counts = np.bincount(bins.ravel(), minlength=count * 2048).reshape(count, 8, 256)
    votes = (counts @ _bit_table(np)).reshape(count, 64)
    bits = np.packbits(votes * 2 > features[:, None], axis=1, bitorder="little")
    values = bits.view("<i8").ravel()
    # The validity bitmap by hand: pa.array(..., mask=) imports numpy.ma (~15 ms) to test for a masked array.
    empty = int(np.count_nonzero(lengths == 0))
    valid = pa.py_buffer(np.packbits(lengths != 0, bitorder="little")) if empty else None
    return pa.Array.from_buffers(pa.int64(), count, [valid, pa.py_buffer(values)], null_count=empty)


_TABLES: dict[str, Any] = {}


def _byte_offsets(np: Any) -> Any:
    """Byte j of a feature counts in bins 256j..256j+255."""
    offsets = _TABLES.get("offsets")
    if offsets is None:
        offsets = _TABLES["offsets"] = np.arange(0, 2048, 256, dtype=np.intp)
    return offsets


def _bit_table(np: Any) -> Any:
    """256 x 8: row v holds the bits of the byte value v, lowest first."""
    table = _TABLES.get("bits")
    if table is None:
        # Float: numpy multiplies integer matrices in a plain loop, floats through BLAS (the 8 x 256 by 256 x 8
        # product of a text's votes: 11.5 us as int64, 3.2 as float64, exact for counts below 2**53).
        table = _TABLES["bits"] = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(np.float64)
    return table


def _fmix(np: Any, x: Any) -> Any:
    s = np.uint64(33)
    x ^= x >> s
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> s
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> s
    return x


def _batches(con: Any, files: Iterable[Path], columns: list[str]) -> Iterable[pa.RecordBatch]:
    for file in files:
        try:
            # Through the engine: in an s3:// crawl's reference tree a part is a pointer to the bucket.
            yield from con.batches(file, columns)
        except (OSError, pa.ArrowException, *con.errors) as exc:  # DuckDB reads them for its engine
            raise SegmentError(f"{file}: unreadable parse_text part ({str(exc).splitlines()[0]})") from exc


def signatures(con: Any, segments: list[Any], share: tuple[int, int] = (0, 1)) -> pa.Table:
    """(segment, url, simhash) of every text in the segments' parse_text, read in batches; with ``share`` (i, n),
    of every n-th part from the i-th only, counted over all the segments' parts (n threads take a share each:
    counted per segment, an update of several one-part segments gave every part to the first thread).

    Safe to run in threads beside the job's statements: the engine reads each part on a cursor of its own.
    """
    names: list[str] = []
    urls: list[str] = []
    hashes: list[pa.Array] = []
    first, step = share
    parts = [(seg.name, part) for seg in segments for part in seg.parts("parse_text")][first::step]
    for name, part in parts:
        for batch in _batches(con, [part], ["url", "text"]):
            names += [name] * batch.num_rows
            # As Python strings, not the batch's column: a column read from DuckDB holds its whole batch
            # (the texts too) until it is freed, ~200 MB over a round of bench/realweb.py's pages.
            urls += batch.column(0).to_pylist()
            hashes.append(simhashes(batch.column(1)))
    simhash_column = pa.concat_arrays(hashes) if hashes else pa.nulls(0, pa.int64())
    return pa.Table.from_arrays([pa.array(names, pa.string()), pa.array(urls, pa.string()), simhash_column],
                                schema=SIGNATURES)


def unfollow_duplicates(con: Any, cfg: CrawlerConfig, old_pages: str, old_links: str) -> None:
    """Table ``unfollowed`` (url): pages fetched now whose outlinks are not followed (see the module's docstring).

    Reads table ``fetched`` (the update's latest fetch records), ``old_pages`` and ``old_links`` (the live version's).
    """
    if not cfg.traps.skip_duplicate_outlinks:
        con.create_table("unfollowed", "SELECT url FROM fetched WHERE false")
        return
    fetched_statuses = ", ".join(f"'{s}'" for s in _FETCHED)
    # The pages of the update with an earlier page of their host and digest above them: few or none. The
    # link condition, a join over all the old links, runs in a second statement only when there are some.
    con.create_table("unfollow_candidates", f"""
        WITH fresh AS (
            SELECT url, host, digest FROM fetched WHERE status = '{FetchStatus.SUCCESS}' AND digest IS NOT NULL
        ),
        seen AS (
            SELECT url, host, digest FROM fresh
            UNION ALL
            SELECT p.url, p.host, p.digest FROM {old_pages} p
            WHERE p.status IN ({fetched_statuses}) AND p.digest IN (SELECT digest FROM fresh)
              AND NOT EXISTS (SELECT 1 FROM fetched f WHERE f.url = p.url)
        )
        SELECT DISTINCT x.url, x.digest FROM fresh x JOIN seen y ON y.host = x.host AND y.digest = x.digest
        WHERE y.url <> x.url AND (length(y.url) < length(x.url) OR (length(y.url) = length(x.url) AND y.url < x.url))
          AND starts_with(x.url, {dir_sql('y.url')})""")
    if not con.rows("SELECT count(*) FROM unfollow_candidates")[0][0]:
        con.create_table("unfollowed", "SELECT url FROM unfollow_candidates")
        return
    # The linking page may be of this update too: a fetch that follows outlinks (fetcher.follow_depth) fetches
    # a trap's first page and the pages it links to in one segment. Its outlinks are first narrowed to those
    # into a candidate (what the correlation asks anyway): left to the planner, every kept outlink went
    # through the join with ``fetched``, whose hash table was updatedb's peak at 10M URLs (the statement
    # 2.4-2.7 s and the job 2.54 GB then, 1.4-1.5 s and 2.37 GB now; docs/benchmarks.md).
    con.create_table("unfollowed", f"""
        SELECT c.url FROM unfollow_candidates c
        WHERE EXISTS (SELECT 1 FROM {old_links} l JOIN {old_pages} z ON z.url = l.from_url
                      WHERE l.to_url = c.url AND z.digest = c.digest AND z.url <> c.url)
           OR EXISTS (SELECT 1 FROM (SELECT from_url, to_url FROM kept_links
                                     WHERE to_url IN (SELECT url FROM unfollow_candidates)) n
                      JOIN fetched z ON z.url = n.from_url
                      WHERE n.to_url = c.url AND z.digest = c.digest AND n.from_url <> c.url)""")


def unfollowed_figures() -> str:
    """A one-row relation for updatedb's one statement of figures: ``unfollowed_pages`` (the pages of table
    ``unfollowed``) and ``unfollowed_outlinks`` (the outlinks they kept, relation ``kept_links``)."""
    return """(SELECT p.unfollowed_pages, k.unfollowed_outlinks
        FROM (SELECT count(*) AS unfollowed_pages FROM parsed WHERE url IN (SELECT url FROM unfollowed)) p
        CROSS JOIN (SELECT count(*) AS unfollowed_outlinks FROM kept_links
                    WHERE from_url IN (SELECT url FROM unfollowed)) k)"""


def parent_sql(url: str) -> str:
    """The same page one folder up ('/a/b/' -> '/a/', '/a/b/x.html' -> '/a/x.html'; the query dropped).

    Not the folder a file sits in: '/a/index.html' is '/a/' again on most servers, a trap's
    '/t/sub/page.html' is '/t/page.html' again. A page in the root folder is its own parent.
    """
    # The URL before any query or fragment, without a regex (a third of this expression's cost per page).
    base = f"split_part(split_part({url}, '?', 1), '#', 1)"
    folder = f"regexp_extract({base}, '^[^?#]*/', 0)"
    up = f"regexp_extract(rtrim({folder}, '/'), '^[^?#]*/', 0)"
    return f"(CASE WHEN ends_with({up}, '://') THEN {url} ELSE {up} || substr({base}, length({folder}) + 1) END)"


def _ancestors_sql(url: str) -> str:
    """The folder URLs above ``url``, the root first ('http://h/a/b/c.html' -> ['http://h/', 'http://h/a/', 'http://h/a/b/'])."""
    origin = f"regexp_extract({url}, '^[^:/?#]+://[^/?#]*', 0)"
    segs = f"string_split(trim(regexp_extract({url}, {sql_string(_PATH_SQL)}, 1), '/'), '/')"
    return (f"list_transform(range(0, array_length({segs})), lambda k: {origin} || '/' ||"
            f" CASE WHEN k = 0 THEN '' ELSE array_to_string({segs}[1:k], '/') || '/' END)")


def detect(con: Any, cfg: CrawlerConfig, pages: str, known: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """New suspected traps among the hosts fetched in this update (table ``fetched``), read from ``pages`` (the
    version just written): a list of {host, prefix, repeats, window}; ``known``: the traps meta.json has already.

    A page *repeats* when its parent (``parent_sql``) has the same digest or a SimHash within
    ``traps.simhash_distance`` bits: a trap's every page is its parent's page again. A trap starts at a folder whose page some page below
    repeats while it does not repeat its own parent (the trap's entry: '/t/' of '/t/', '/t/a/',
    '/t/a/next/'...; the folders inside a trap repeat theirs, the root and real pages do not): it
    is suspected when, among the host's latest ``traps.window`` pages, at least
    ``traps.min_repeats`` below it repeat and they are at least ``traps.repeat_ratio`` of the pages
    below it.
    """
    t = cfg.traps
    if not t.min_repeats:
        return []
    fetched_statuses = ", ".join(f"'{s}'" for s in _FETCHED)
    near = f"(y.digest = x.digest OR bit_count(xor(x.simhash, y.simhash)) <= {int(t.simhash_distance)})"

    def repeats_of(hosts: str) -> str:
        # The pages of ``hosts`` (a relation of host) and those that repeat their parent.
        return f"""host_pages AS (
            SELECT url, host, fetch_time, digest, simhash, {parent_sql('url')} AS parent FROM {pages}
            WHERE status IN ({fetched_statuses}) AND host IN (SELECT DISTINCT host FROM {hosts})
        ),
        repeats AS (
            SELECT DISTINCT x.url, x.host, x.parent FROM host_pages x JOIN host_pages y ON y.url = x.parent AND y.host = x.host
            WHERE y.url <> x.url AND {near}
        )"""

    # Hosts with enough repeats at all (suspects) are rare: the window's sort and the prefix count run only
    # for theirs, in a second statement, so an update finding none (nearly every one) binds half the SQL.
    suspects = [row[0] for row in con.rows(f"""WITH {repeats_of("fetched")}
        SELECT host FROM repeats GROUP BY host HAVING count(*) >= {int(t.min_repeats)} ORDER BY host""")]
    if not suspects:
        return []
    con.register("trap_suspects", pa.table({"host": suspects}, schema=pa.schema([PAGES.field("host")])))
    rows = con.rows(f"""
        WITH {repeats_of("trap_suspects")},
        entries AS (
            SELECT DISTINCT r.parent AS url FROM repeats r
            WHERE NOT EXISTS (SELECT 1 FROM repeats q WHERE q.url = r.parent)
        ),
        recent AS (
            SELECT url, host, {_ancestors_sql('url')} AS above
            FROM (SELECT *, row_number() OVER (PARTITION BY host ORDER BY fetch_time DESC, url) AS rn
                  FROM host_pages) r
            WHERE rn <= {int(t.window)}
        ),
        below AS (
            SELECT host, url, unnest(above) AS prefix, url IN (SELECT url FROM repeats) AS repeat FROM recent
        )
        SELECT host, prefix, count(*) FILTER (WHERE repeat) AS repeats, count(*) AS below FROM below
        WHERE prefix <> url AND prefix IN (SELECT url FROM entries) GROUP BY host, prefix
        HAVING count(*) FILTER (WHERE repeat) >= {int(t.min_repeats)}
           AND count(*) FILTER (WHERE repeat) >= {float(t.repeat_ratio)!r} * count(*)
        ORDER BY host, prefix""")
    return shallowest(rows, known)


def shallowest(rows: list[tuple[Any, ...]], known: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The qualifying (host, prefix, repeats, below) rows with no qualifying or known prefix at or above them."""
    taken = {(k.get("host"), k.get("prefix")) for k in known}
    prefixes = [(host, prefix) for host, prefix, *_ in rows] + list(taken)
    found = []
    for host, prefix, repeats, below in rows:
        if any(h == host and str(prefix).startswith(str(p)) and (p != prefix or (h, p) in taken) for h, p in prefixes):
            continue
        found.append({"host": host, "prefix": prefix, "repeats": int(repeats), "window": int(below)})
    return found


def record(meta: dict[str, Any], found: list[dict[str, Any]], log: Any, when: str) -> None:
    """Add ``found`` to meta.json's ``traps`` (read by generate) and log each as ``host.trap_suspected``."""
    known = [k for k in meta.get("traps") or [] if isinstance(k, dict)]
    for trap in found:
        log.warning("host.trap_suspected", host=trap["host"], prefix=trap["prefix"], repeats=trap["repeats"],
                    window=trap["window"])
        known.append({**trap, "since": when})
    meta["traps"] = known


def generate_exclusion(con: Any, cfg: CrawlerConfig, version: Any, page: str = "p") -> str:
    """SQL to AND into generate's due filter ('' when no trap is known): no unfetched URL below a suspected
    trap's prefix whose parent (the same page one folder up) repeats its own parent, as a trap's pages do.

    So a trap stops growing, while a real page below the prefix (whose parent is no repeat, or was
    never fetched) is still selected: a trap found at '/' of a site that serves its home page for
    every unknown path does not take the site's real pages with it.
    """
    traps = [k for k in version.meta.get("traps") or [] if isinstance(k, dict) and k.get("host") and k.get("prefix")]
    if not traps:
        return ""
    con.register("trap_prefixes", pa.table({"host": [str(k["host"]) for k in traps],
                                            "prefix": [str(k["prefix"]) for k in traps]}))
    pages = pages_of(con, version.path)
    fetched = ", ".join(f"'{s}'" for s in _FETCHED)
    near = f"(b.digest = a.digest OR bit_count(xor(a.simhash, b.simhash)) <= {int(cfg.traps.simhash_distance)})"
    con.create_table("trap_blocked", f"""
        SELECT c.url FROM (
            SELECT u.url, {parent_sql('u.url')} AS parent FROM {pages} u
            WHERE u.status = '{DbStatus.UNFETCHED}' AND EXISTS (
                SELECT 1 FROM trap_prefixes t WHERE t.host = u.host AND starts_with(u.url, t.prefix) AND u.url <> t.prefix)
        ) c
        JOIN (SELECT url, digest, simhash, {parent_sql('url')} AS parent FROM {pages} WHERE status IN ({fetched})) a
          ON a.url = c.parent AND a.url <> c.url
        JOIN (SELECT url, digest, simhash FROM {pages} WHERE status IN ({fetched})) b
          ON b.url = a.parent AND b.url <> a.url
        WHERE {near}""")
    return f"AND {page}.url NOT IN (SELECT url FROM trap_blocked)"


def pages_of(con: Any, version_dir: Path) -> str:
    """The pages a version folder (complete or still under its temporary name) holds, as a relation."""
    return con.source(sorted((version_dir / "pages").glob("*.parquet")), PAGES)
