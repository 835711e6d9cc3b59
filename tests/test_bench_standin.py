"""bench/parse_standin.py's two copies of the crawler: one records each page's parse, the other hands it back."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import parse_standin  # noqa: E402

PAGE = b"<html><title>T</title><body><p>Hello <b>wor</b>ld</p><a href='/next.html'>next</a></body></html>"
PARSE = """
import sys
from crawler.parsers.html import HtmlParser
res = HtmlParser().parse(sys.stdin.buffer.read(), sys.argv[1], "text/html")
print(res.title, "|", res.text, "|", [(o.url, o.anchor) for o in res.outlinks])
"""


def _parse(tree, url, env, body=PAGE):
    # Run from the copy itself: `python -c` puts its working folder first on the path.
    done = subprocess.run([sys.executable, "-c", PARSE, url], input=body, capture_output=True, check=True, cwd=tree,
                          env={**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1", **env})
    return done.stdout.decode().strip()


def test_the_stand_in_returns_what_the_recording_copy_parsed_and_parses_what_it_never_saw(tmp_path, monkeypatch):
    monkeypatch.setattr(parse_standin, "WORK", tmp_path / "work")
    record = parse_standin.copy_tree(ROOT, "record", parse_standin.RECORD)
    standin = parse_standin.copy_tree(ROOT, "standin", parse_standin.STANDIN)
    records = tmp_path / "records"
    records.mkdir()
    parsed = _parse(record, "http://a.test/", {"STANDIN_RECORD": str(records)})
    assert parsed == "T | Hello world next | [('http://a.test/next.html', 'next')]"
    db = tmp_path / "results.sqlite"
    assert parse_standin.store(records, db) == 1
    # The stored result comes back for its URL, whatever the body now says; another URL is parsed as usual.
    other = b"<html><title>Other</title><body>x</body></html>"
    assert _parse(standin, "http://a.test/", {"STANDIN_DB": str(db)}, other) == parsed
    assert _parse(standin, "http://b.test/", {"STANDIN_DB": str(db)}, other) == "Other | x | []"
    # The copies are the source's crawler with the hook appended; the source is left as it was.
    assert "_standin_record()" not in (ROOT / "crawler" / "parsers" / "html.py").read_text()
    assert (standin / "config.yaml").read_bytes() == (ROOT / "config.yaml").read_bytes()
