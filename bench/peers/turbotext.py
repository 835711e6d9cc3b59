"""An independent rendering of pages' visible text, for bench/textcheck.py.

turbohtml's WHATWG tree builder and plain-text renderer: neither our parser nor lexbor. It is told only
what the crawler counts as invisible (the elements below) and that list items carry no marker; where a
break falls between two runs of text is its own decision. Reads a JSON list of file paths on stdin and
writes the JSON list of their texts, whitespace collapsed, to stdout.
"""

from __future__ import annotations

import json
import sys

import turbohtml
from turbohtml import PlainText

INVISIBLE = ("script", "style", "noscript", "template", "title", "iframe", "noembed")
OPTIONS = PlainText(layout="strict", bullet="", table_cell_separator=" ")


def text(path: str) -> str:
    with open(path, "rb") as fh:
        doc = turbohtml.parse(fh.read(), positions=False)
    body = doc.select_one("body")
    if body is None:
        return ""
    for element in reversed(list(body.iter_elements(INVISIBLE))):  # innermost first
        element.decompose()
    for element in list(body.iter_elements("ol")):
        element.tag = "ul"  # an ordered list's numbers are the renderer's, not the page's text
    return " ".join(body.to_text(OPTIONS).split())


if __name__ == "__main__":
    json.dump([text(path) for path in json.load(sys.stdin)], sys.stdout)
