"""The crawler's page text against an independent renderer's, on the real documentation trees.

    make bench-textcheck
    .venv-bench-crawler/bin/python bench/textcheck.py [--only core|more|all|django,...] [--pages 200] [--show 2]

The text the crawler writes to parse_text is what a search index reads: two words run together, or one
word split in two, is a term lost. A test page of ours only checks what we thought of; real HTML written
by others (bench/realsites.py's Debian trees: Sphinx, DocBook, Doxygen, gtk-doc, Texinfo, javadoc, ...)
shows what we did not. Each tree's first ``--pages`` HTML files (sorted by path) go through the crawler's
HtmlParser and through bench/peers/turbotext.py (turbohtml's tree and plain-text renderer, in the peers'
virtualenv), and the two texts are compared with whitespace collapsed. Printed per tree: pages compared,
pages whose texts differ, and for up to ``--show`` of those the text around their first difference.

A difference is a question, not a verdict: on 2026-12-05 most were ours (comments and empty elements
splitting words, <acronym> not taken as inline) and were fixed; those left are where we judge ours the
better index text (docs/benchmarks.md, "Another HTML parser measured").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realsites import KNOWN, PEERS, SCRAPY_PYTHON, chosen, prepare  # noqa: E402

from crawler.parsers.html import HtmlParser  # noqa: E402

CONTEXT = 70  # characters shown on each side of a first difference


def pages(root: Path, count: int) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".html", ".htm") and p.is_file())[:count]


def ours(parser: HtmlParser, root: Path, files: list[Path]) -> list[str]:
    # The URL only places the page for its links; the text does not depend on it.
    return [parser.parse(f.read_bytes(), "http://127.0.0.1/" + f.relative_to(root).as_posix(), "text/html").text
            for f in files]


def theirs(files: list[Path]) -> list[str]:
    done = subprocess.run([str(SCRAPY_PYTHON), str(PEERS / "turbotext.py")], input=json.dumps(list(map(str, files))),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def first_difference(a: str, b: str) -> tuple[str, str]:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = max(0, at - CONTEXT)
    return a[start:at + CONTEXT], b[start:at + CONTEXT]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="all", help="sites, or the groups core, more, all (comma-separated)")
    parser.add_argument("--pages", type=int, default=200, help="HTML files compared per tree")
    parser.add_argument("--show", type=int, default=2, help="differing pages shown per tree")
    args = parser.parse_args()
    html = HtmlParser()
    total = differing = 0
    for name in chosen(args.only):
        site = next(s for s in KNOWN if s.name == name)
        root = prepare(site)
        files = pages(root, args.pages)
        differ = [(f, a, b) for f, a, b in zip(files, ours(html, root, files), theirs(files), strict=True)
                  if a != " ".join(b.split())]
        total, differing = total + len(files), differing + len(differ)
        print(f"{name:10} {len(files):5} pages, {len(differ):4} differ")
        for f, a, b in differ[:args.show]:
            mine, peer = first_difference(a, b)
            print(f"    {f.relative_to(root)}\n      crawler: {mine!r}\n      peer:    {peer!r}")
    print(f"all        {total:5} pages, {differing:4} differ")


if __name__ == "__main__":
    main()
