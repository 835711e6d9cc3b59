"""What an independent HTML library reads from a page, for bench/pagecheck.py: its visible text and its links.

turbohtml's WHATWG tree builder, plain-text renderer and <base>/refresh handling, with the standard
library's urljoin: neither our parser, nor lexbor, nor our URL resolver. It is told only what the crawler
counts as invisible, which elements and <link rel> types are links, that rel=nofollow and a robots
nofollow are obeyed, and that list items carry no marker; where a break falls between two runs of text,
what an href resolves to and which <base> counts are its own decisions.

Reads {"paths": [...], "urls": [...], "tags": [...], "link_rels": [...], "invisible": [...]} as JSON on stdin (each
file with the URL it is served at; the crawler's link elements, link types and invisible elements) and writes a JSON list of {"text": ..., "links": [...]}, text whitespace-collapsed, links
absolute and unnormalized, in document order.
"""

from __future__ import annotations

import json
import sys
from urllib.parse import urljoin

import turbohtml
from turbohtml import PlainText

OPTIONS = PlainText(layout="strict", bullet="", table_cell_separator=" ")
TARGET = {"a": "href", "area": "href", "link": "href", "frame": "src", "iframe": "src"}


def tokens(value: str | list[str] | None) -> list[str]:
    if not value:
        return []
    return [t.lower() for t in (value if isinstance(value, list) else value.split())]


def links(doc: turbohtml.Document, url: str, tags: tuple[str, ...], link_rels: set[str]) -> list[str]:
    for meta in doc.select("meta[name]"):
        if meta.attrs.get("name", "").strip().lower() == "robots" and (
                {"nofollow", "none"} & set(tokens((meta.attrs.get("content") or "").replace(",", " ")))):
            return []
    base, found = doc.base_url(url), []
    for element in doc.iter_elements(tags):
        rels = tokens(element.attrs.get("rel"))
        if "nofollow" in rels or element.tag == "link" and ("stylesheet" in rels or not link_rels & set(rels)):
            continue
        if (raw := element.attrs.get(TARGET[element.tag])) is None:
            continue
        try:
            found.append(urljoin(base, raw.strip()))
        except ValueError:  # what urljoin cannot split (a bracketed host that is no address) is no link
            continue
    if (refresh := doc.meta_refresh(base)) is not None:
        found.append(refresh[1])
    return found


def text(doc: turbohtml.Document, invisible: tuple[str, ...]) -> str:
    body = doc.select_one("body")
    if body is None:
        return ""
    for element in reversed(list(body.iter_elements(invisible))):  # innermost first
        element.decompose()
    for element in list(body.iter_elements("ol")):
        element.tag = "ul"  # an ordered list's numbers are the renderer's, not the page's text
    return " ".join(body.to_text(OPTIONS).split())


def read(path: str, url: str, tags: tuple[str, ...], link_rels: set[str], invisible: tuple[str, ...]) -> dict[str, object]:
    with open(path, "rb") as fh:
        doc = turbohtml.parse(fh.read(), positions=False)
    found = links(doc, url, tags, link_rels)  # before text(), which deletes elements
    return {"text": text(doc, invisible), "links": found}


if __name__ == "__main__":
    job = json.load(sys.stdin)
    tags, rels = tuple(t for t in job["tags"] if t in TARGET), {r.lower() for r in job["link_rels"]}
    invisible = tuple(job["invisible"])
    json.dump([read(p, u, tags, rels, invisible) for p, u in zip(job["paths"], job["urls"], strict=True)], sys.stdout)
