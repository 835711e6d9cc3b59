"""Spider-trap defences (crawler/jobs/traps.py): SimHash, the duplicate rule at updatedb, the novelty budget."""

from __future__ import annotations

import json
import random
from datetime import datetime

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import structlog

from crawler.errors import SegmentError
from crawler.jobs import traps
from crawler.jobs.engine import open_engine
from crawler.jobs.generate import generate
from crawler.jobs.updatedb import updatedb
from crawler.models import PARSE_TEXT
from crawler.segments.layout import part_name
from crawler.webdb.store import VersionedStore
from tests.jobs import simhash_reference
from tests.jobs.conftest import NOW, T0, fetch, make_cfg, page, parse, read_pages, write_db, write_parquet

LOG = structlog.get_logger()
SEG = "20260101T010000000Z"
LATER = datetime(2027, 1, 1)
H = "http://h.example"


def _words(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 8))) for _ in range(n)]


def _bits(a: int, b: int) -> int:
    return bin((a ^ b) & (2**64 - 1)).count("1")


@pytest.mark.parametrize(("change", "low", "high"), [
    (lambda t, i: t, 0, 0),
    (lambda t, i: t[:5000] + " something else entirely " + t[5040:], 0, 3),  # one phrase changed
    (lambda t, i: t + " and a footer", 0, 3),
    (lambda t, i: t[:-200], 0, 3),  # the end cut
    (lambda t, i: " ".join(_words(1000 + i, 3000)), 20, 44),  # unrelated texts
])
def test_simhash_distance(change, low, high):
    """Near-duplicate texts differ in few bits (on average over 20 texts: SimHash is a vote), unrelated ones in ~32."""
    distances = []
    for i in range(20):
        text = " ".join(_words(i, 3000))
        distances.append(_bits(traps.simhash(text), traps.simhash(change(text, i))))
    assert low <= sum(distances) / len(distances) <= high


def test_simhash_of_short_texts():
    """Short pages get a signature too; two different ones differ."""
    a, b = traps.simhash("a short page about cats"), traps.simhash("a short page about dogs")
    assert a is not None and b is not None and a != b


@pytest.mark.parametrize(("text", "value"), [
    ("", None),
    (None, None),
    ("the quick brown fox jumps over the lazy dog", -4848269642247774755),
])
def test_simhash_is_stable(text, value):
    """The same text gives the same signature in every process and release: the webdb stores it."""
    assert traps.simhash(text) == value


def _texts(seed: int) -> list[str | None]:
    rng = random.Random(seed)
    alphabet = "abcdefghij  \u00e9\u4e2d-."
    texts: list[str | None] = [None, "", " ", "a", "a ", " a", "a  b", "x" * 70_000, "word " * 20_000,
                               "\u00e9t\u00e9 \u4e2d\u6587 " * 5_000, "ab " * 1_025, "ab " * 1_024]
    for _ in range(120):
        length = rng.choice([0, 5, 40, 400, 3_000, 12_000, 70_000])
        texts.append("".join(rng.choice(alphabet) for _ in range(length)))
    return texts


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.binary()])
def test_simhashes_of_a_batch_equal_each_texts_simhash_by_its_definition(kind):
    """The batched SimHash (one numpy pass over many texts) gives, for every text, the value the plain
    definition gives: word starts, sampling of long texts, zeros past a text's end never its neighbour's."""
    texts = _texts(7)
    values = [None if t is None else t.encode() if kind == pa.binary() else t for t in texts]
    column = pa.array(values, kind)
    expected = [simhash_reference.simhash(t) for t in texts]
    assert traps.simhashes(column).to_pylist() == expected
    assert traps.simhashes(column.slice(3, 50)).to_pylist() == expected[3:53]  # a batch that starts mid-buffer
    assert [traps.simhash(t) for t in texts[:40]] == expected[:40]


@pytest.mark.parametrize(("url", "folder", "parent", "ancestors"), [
    ("http://h/", "http://h/", "http://h/", ["http://h/"]),
    ("http://h/a.html", "http://h/", "http://h/a.html", ["http://h/"]),
    ("http://h/t/a/next/", "http://h/t/a/next/", "http://h/t/a/", ["http://h/", "http://h/t/", "http://h/t/a/"]),
    ("http://h:8/d/x.html?q=/1/2", "http://h:8/d/", "http://h:8/x.html", ["http://h:8/", "http://h:8/d/"]),
    ("http://h/t/sub/page.html", "http://h/t/sub/", "http://h/t/page.html", ["http://h/", "http://h/t/", "http://h/t/sub/"]),
    ("http://h/cal?year=2001", "http://h/", "http://h/cal?year=2001", ["http://h/"]),
])
def test_folder_expressions(url, folder, parent, ancestors):
    """A URL's folder, its parent (the same page one folder up) and the folders above it, as the SQL computes them."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT ?::VARCHAR AS url", [url])
    row = con.execute(f"SELECT {traps.dir_sql('url')}, {traps.parent_sql('url')}, {traps._ancestors_sql('url')} FROM t")
    assert row.fetchone() == (folder, parent, ancestors)


# (pages the webdb has fetched: url -> digest, its links, pages fetched now: url -> digest, pages not followed)
UNFOLLOW = [
    # a trap: every path serves /t/'s page, linked from it
    ({f"{H}/t/": "d1"}, [(f"{H}/t/", f"{H}/t/a/"), (f"{H}/t/", f"{H}/t/next/")],
     {f"{H}/t/a/": "d1", f"{H}/t/next/": "d1"}, {f"{H}/t/a/", f"{H}/t/next/"}),
    ({f"{H}/t/": "d1"}, [(f"{H}/t/", f"{H}/t/a/b/")], {f"{H}/t/a/b/": "d1"}, {f"{H}/t/a/b/"}),
    # a // variant linked from the page itself (/p//0.html lies in /p/'s folder)
    ({f"{H}/p/0.html": "d1"}, [(f"{H}/p/0.html", f"{H}/p//0.html")], {f"{H}/p//0.html": "d1"}, {f"{H}/p//0.html"}),
    # siblings in one folder, one linking the other: same links either way
    ({f"{H}/p/a.html": "d1"}, [(f"{H}/p/a.html", f"{H}/p/b.html")], {f"{H}/p/b.html": "d1"}, {f"{H}/p/b.html"}),
    # mirrored trees: the same index in two folders, each followed (its links reach its own tree)
    ({f"{H}/": "d0", f"{H}/v1/index.html": "d1"}, [(f"{H}/", f"{H}/v2/index.html")],
     {f"{H}/v2/index.html": "d1"}, set()),
    # identical redirect stubs in nested folders (Boost's libs/*/index.html), linked from elsewhere: followed
    ({f"{H}/": "d0", f"{H}/libs/index.html": "d1"}, [(f"{H}/", f"{H}/libs/num/index.html")],
     {f"{H}/libs/num/index.html": "d1"}, set()),
    # refetching the page that was followed: still followed
    ({f"{H}/t/": "d1", f"{H}/t/a/": "d1"}, [(f"{H}/t/", f"{H}/t/a/")], {f"{H}/t/": "d1"}, set()),
    # another host with the same content, or different content: followed
    ({"http://other.example/": "d1"}, [("http://other.example/", f"{H}/t/")], {f"{H}/t/": "d1"}, set()),
    ({f"{H}/t/": "d1"}, [(f"{H}/t/", f"{H}/t/a/")], {f"{H}/t/a/": "d2"}, set()),
]


@pytest.mark.parametrize(("known", "links", "now", "unfollowed"), UNFOLLOW)
def test_duplicate_pages_are_not_followed(cfg, make_segment, known, links, now, unfollowed):
    """A page repeating a shorter URL of its host that it lies below, and linked from a page of its content,
    adds no new URL; it is still recorded."""
    write_db(cfg, [page(u, status="fetched", digest=d, fetch_time=T0, next_fetch=LATER) for u, d in known.items()],
             links=[{"from_url": f, "to_url": t, "anchor": ""} for f, t in links])
    seg = make_segment(SEG, [fetch(u, digest=d) for u, d in now.items()],
                       [parse(u, [(f"{u}new-{i}/", "x") for i in range(3)]) for u in now])
    report = updatedb(cfg, [seg], LOG, now=NOW)
    pages = read_pages(cfg)
    assert all(pages[u]["status"] == "fetched" for u in now)
    new = {u for u, p in pages.items() if p["status"] == "unfetched"}
    followed = {u for u in now if f"{u}new-0/" in new}
    assert set(now) - followed == unfollowed
    assert report.unfollowed == (len(unfollowed), 3 * len(unfollowed))


def test_duplicate_pages_are_followed_when_switched_off(tmp_path, make_segment):
    """traps.skip_duplicate_outlinks: false follows every page."""
    cfg = make_cfg(tmp_path, traps={"skip_duplicate_outlinks": False})
    write_db(cfg, [page(f"{H}/t/", status="fetched", digest="d1", fetch_time=T0)],
             links=[{"from_url": f"{H}/t/", "to_url": f"{H}/t/a/", "anchor": ""}])
    seg = make_segment(SEG, [fetch(f"{H}/t/a/", digest="d1")], [parse(f"{H}/t/a/", [(f"{H}/t/a/b/", "b")])])
    assert updatedb(cfg, [seg], LOG, now=NOW).unfollowed == (0, 0)
    assert read_pages(cfg)[f"{H}/t/a/b/"]["status"] == "unfetched"


@pytest.mark.parametrize(("rows", "known", "found"), [
    # inside a trap every folder qualifies: the one it starts at is taken
    ([("h", "http://h/t/", 30, 32), ("h", "http://h/t/a/", 12, 12), ("h", "http://h/t/b/", 10, 10)], [],
     ["http://h/t/"]),
    # two qualifying siblings: both
    ([("h", "http://h/a/", 12, 12), ("h", "http://h/b/", 10, 11)], [], ["http://h/a/", "http://h/b/"]),
    # known already, or below a known trap: nothing new
    ([("h", "http://h/t/", 25, 25)], [{"host": "h", "prefix": "http://h/t/"}], []),
    ([("h", "http://h/t/a/", 40, 40)], [{"host": "h", "prefix": "http://h/t/"}], []),
    # a folder above a known trap, qualifying on its own: taken
    ([("h", "http://h/", 40, 40)], [{"host": "h", "prefix": "http://h/t/"}], ["http://h/"]),
    # the same prefix on another host does not count
    ([("h", "http://h/t/a/", 40, 40)], [{"host": "g", "prefix": "http://h/t/"}], ["http://h/t/a/"]),
])
def test_shallowest_prefixes(rows, known, found):
    """Of the qualifying folders, those with no qualifying or known folder above them become traps."""
    assert [t["prefix"] for t in traps.shallowest(rows, known)] == found


def _trap_web(cfg, make_segment, texts: dict[str, str]) -> None:
    """One segment fetching every page of ``texts`` (url -> text), each linking three children below it."""
    seg = make_segment(SEG, [fetch(u, digest=f"{i:032x}") for i, u in enumerate(texts)],
                       [parse(u, [(f"{u}{c}/", c) for c in ("a", "b", "next")]) for u in texts],
                       [{"url": u, "text": t} for u, t in texts.items()])
    updatedb(cfg, [seg], LOG, now=NOW)


def _tree(root: str, depth: int) -> list[str]:
    level, out = [root], [root]
    for _ in range(depth):
        level = [f"{u}{c}/" for u in level for c in ("a", "b", "next")]
        out += level
    return out


BOILERPLATE = " ".join(_words(3, 400))


@pytest.mark.parametrize(("texts", "trap"), [
    # each page shows its own path (no two digests equal) in the same long template: a trap below /cal/
    ({u: f"{BOILERPLATE} you are at {u}" for u in _tree(f"{H}/cal/", 2)}, f"{H}/cal/"),
    # a real tree: every page its own text
    ({u: " ".join(_words(i + 10, 400)) for i, u in enumerate(_tree(f"{H}/docs/", 2))}, None),
    # too few repeats (traps.min_repeats 10): 3 below /cal/
    ({u: f"{BOILERPLATE} you are at {u}" for u in _tree(f"{H}/cal/", 1)}, None),
])
def test_novelty_budget(cfg, make_segment, texts, trap):
    """A folder whose pages repeat their parent's text becomes a suspected trap: generate queues nothing new below it."""
    write_db(cfg, [page(f"{H}/", status="fetched", digest="f" * 32, fetch_time=T0, next_fetch=LATER), page(f"{H}/other/x.html")])
    _trap_web(cfg, make_segment, texts)
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    suspected = [t["prefix"] for t in json.loads((version.path / "meta.json").read_text()).get("traps", [])]
    assert suspected == ([trap] if trap else [])
    pages = read_pages(cfg)
    assert all(pages[u]["simhash"] is not None for u in texts)
    report = generate(cfg, LOG, now=NOW)
    selected = set()
    if report.segment is not None:
        selected = {r["url"] for p in report.segment.parts("fetchlist") for r in pq.read_table(p).to_pylist()}
    unfetched = {u for u, p in pages.items() if p["status"] == "unfetched"}
    assert f"{H}/other/x.html" in selected
    if trap:
        assert selected == {u for u in unfetched if not u.startswith(trap)}
    else:
        assert selected == unfetched


def test_a_corrupt_parse_text_part_is_named(cfg, make_segment):
    """updatedb stops with an error naming the unreadable parse_text part, and the webdb stays as it was."""
    write_db(cfg, [page(f"{H}/")])
    seg = make_segment(SEG, [fetch(f"{H}/")], [parse(f"{H}/")], [{"url": f"{H}/", "text": "some text"}])
    part = seg.parts("parse_text")[0]
    part.write_bytes(b"not parquet at all")
    with pytest.raises(SegmentError, match="parse_text"):
        updatedb(cfg, [seg], LOG, now=NOW)
    assert VersionedStore(cfg.crawl_path / "webdb").require_current().number == 1


def test_a_trap_at_the_root_keeps_the_real_pages(cfg, make_segment):
    """A site serving its home page at every path is a trap at '/': its growth stops, its real pages are still
    selected (their parent, the same page one folder up, is no repeat)."""
    real = [f"{H}/blog/post.html", f"{H}/about.html"]
    write_db(cfg, [page(u) for u in real])
    texts = {u: f"{BOILERPLATE} you are at {u}" for u in _tree(f"{H}/", 2)}
    _trap_web(cfg, make_segment, texts)
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    assert [t["prefix"] for t in version.meta.get("traps", [])] == [f"{H}/"]
    report = generate(cfg, LOG, now=NOW)
    selected = {r["url"] for p in report.segment.parts("fetchlist") for r in pq.read_table(p).to_pylist()}
    assert selected == set(real)


def test_threads_sharing_the_parts_sign_every_text_once(cfg, make_segment):
    """updatedb's SimHash threads each take every n-th parse_text part: together, each text once."""
    texts = [{"url": f"{H}/p{i}", "text": f"text number {i} " * (i + 1)} for i in range(7)]
    seg = make_segment(SEG, [fetch(t["url"]) for t in texts], [parse(t["url"]) for t in texts], texts[:1])
    for k, row in enumerate(texts[1:], start=1):  # one part each, as a fetch's commits write them
        write_parquet(seg.dir("parse_text") / part_name(0, k), PARSE_TEXT, [row])
    con = open_engine(cfg)
    try:
        whole = traps.signatures(con, [seg]).to_pylist()
        shares = [row for i in range(3) for row in traps.signatures(con, [seg], (i, 3)).to_pylist()]
    finally:
        con.close()
    assert len(whole) == 7
    assert sorted(shares, key=lambda r: r["url"]) == sorted(whole, key=lambda r: r["url"])


def test_the_shares_are_counted_over_all_the_segments_parts(cfg, make_segment):
    """Several one-part segments (an update of several rounds' segments): each thread gets one of them, not the
    first thread every part; each text still signed once, with its own segment's name."""
    names = [SEG, "20260101T020000000Z"]
    segments = []
    for k, name in enumerate(names):
        text = {"url": f"{H}/s{k}", "text": f"segment {k} text"}
        segments.append(make_segment(name, [fetch(text["url"])], [parse(text["url"])], [text]))
    con = open_engine(cfg)
    try:
        shares = [traps.signatures(con, segments, (i, 2)).to_pylist() for i in range(2)]
    finally:
        con.close()
    assert [[(r["segment"], r["url"]) for r in share] for share in shares] == [[(SEG, f"{H}/s0")],
                                                                             [(names[1], f"{H}/s1")]]
