"""text/plain: decoded, whitespace collapsed, no outlinks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.parsers.text import TextParser

URL = "http://example.com/notes.txt"


@pytest.mark.parametrize(
    ("body", "content_type", "text", "charset"),
    [
        (b"  Line one\n\n\tline   two \r\n", "text/plain", "Line one line two", "utf-8"),
        ("Grüße".encode("cp1252"), "text/plain; charset=windows-1252", "Grüße", "cp1252"),
        (
            b"<a href='/x'>not a link in text</a>",
            "text/plain",
            "<a href='/x'>not a link in text</a>",
            "utf-8",
        ),
        (b"", "text/plain", "", "utf-8"),
    ],
)
def test_plain_text(body, content_type, text, charset):
    """text/plain: decoded text with whitespace collapsed, no title, never any outlinks."""
    res = TextParser().parse(body, URL, content_type)
    assert (res.status, res.title, res.text, res.outlinks) == ("success", "", text, [])
    assert res.metadata["charset"] == charset


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=2048), content_type=st.none() | st.text(max_size=40))
def test_text_arbitrary_bytes_never_raise(body, content_type):
    """Any bytes with any header decode to UTF-8-safe text."""
    res = TextParser().parse(body, URL, content_type)
    assert res.status == "success"
    res.text.encode("utf-8")
