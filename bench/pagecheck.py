"""What the crawler reads from real pages, against what an independent HTML library reads: text and links.

    make bench-pagecheck
    .venv-bench-crawler/bin/python bench/pagecheck.py [--only core|more|all|django,...] [--pages 200] [--show 2]

The text the crawler writes to parse_text is what a search index reads: two words run together, or one
word split in two, is a term lost. Its outlinks are what the crawl can reach. A test page of ours only
checks what we thought of; real HTML written by others (bench/realsites.py's Debian trees: Sphinx,
DocBook, Doxygen, gtk-doc, Texinfo, javadoc, ...) shows what we did not.

Each tree's first ``--pages`` HTML files (sorted by path, each with the URL realsites.py serves it at) go
through the crawler's HTML parser, built from the shipped config.yaml, and through
bench/peers/turbopage.py: turbohtml's tree, plain-text renderer and <base>/refresh handling with the
standard library's urljoin, in the peers' virtualenv. The peer's links pass through the crawler's URL
normalizer, the one piece the two share, so that equal URLs are spelled alike. Printed per tree: pages
compared, pages whose texts differ, pages whose sets of links differ, and for up to ``--show`` of each the
text around the first difference or the links only one side found.

A difference is a question, not a verdict: on 2026-12-05 most text differences were ours (comments and
empty or unknown elements splitting words, <acronym> not taken as inline, windows-1252's undefined
bytes) and were fixed; those left are where ours was judged the better index text (docs/benchmarks.md,
"Another HTML parser measured").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realsites import KNOWN, PEERS, ROOT, SCRAPY_PYTHON, chosen, prepare  # noqa: E402

from crawler.config import load_config  # noqa: E402
from crawler.parsers import html  # noqa: E402
from crawler.urls.normalize import Normalizer  # noqa: E402

CONTEXT = 70  # characters shown on each side of a first difference


def pages(root: Path, count: int) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".html", ".htm") and p.is_file())[:count]


def first_difference(a: str, b: str) -> tuple[str, str]:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = max(0, at - CONTEXT)
    return a[start:at + CONTEXT], b[start:at + CONTEXT]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="all", help="sites, or the groups core, more, all (comma-separated)")
    parser.add_argument("--pages", type=int, default=200, help="HTML files compared per tree")
    parser.add_argument("--show", type=int, default=2, help="differing pages shown per tree, of each kind")
    args = parser.parse_args()
    cfg = load_config(ROOT / "config.yaml")
    ours = html.create(cfg)
    normalize = Normalizer.from_config(cfg).resolve  # what html.create gives the parser
    totals = [0, 0, 0]
    for name in chosen(args.only):
        site = next(s for s in KNOWN if s.name == name)
        root = prepare(site)
        files = pages(root, args.pages)
        urls = ["http://127.0.0.1/" + f.relative_to(root).as_posix() for f in files]
        job = {"paths": list(map(str, files)), "urls": urls, "tags": list(cfg.parse.outlink_tags),
               "link_rels": list(cfg.parse.link_rels), "invisible": list(html._INVISIBLE)}
        peer = json.loads(subprocess.run([str(SCRAPY_PYTHON), str(PEERS / "turbopage.py")], input=json.dumps(job),
                                         capture_output=True, text=True, check=True).stdout)
        texts, links = [], []
        for f, url, theirs in zip(files, urls, peer, strict=True):
            res = ours.parse(f.read_bytes(), url, "text/html")
            if res.text != theirs["text"]:
                texts.append((f, *first_difference(res.text, theirs["text"])))
            mine, other = {o.url for o in res.outlinks}, {u for u in map(normalize, theirs["links"]) if u}
            if mine != other:
                links.append((f, sorted(mine - other)[:3], sorted(other - mine)[:3]))
        totals = [totals[0] + len(files), totals[1] + len(texts), totals[2] + len(links)]
        print(f"{name:10} {len(files):5} pages, text differs on {len(texts):4}, links on {len(links):4}")
        for f, mine, peer_text in texts[:args.show]:
            print(f"    text  {f.relative_to(root)}\n      crawler: {mine!r}\n      peer:    {peer_text!r}")
        for f, only_ours, only_peers in links[:args.show]:
            print(f"    links {f.relative_to(root)}\n      only the crawler's: {only_ours}\n"
                  f"      only the peer's:    {only_peers}")
    print(f"all        {totals[0]:5} pages, text differs on {totals[1]:4}, links on {totals[2]:4}")


if __name__ == "__main__":
    main()
