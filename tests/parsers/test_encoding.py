"""Every path from bytes to text: BOM, header, meta, valid UTF-8, detection, fallback."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.parsers.encoding import codec_name, decode, decode_utf8, detect, header_charset

FRENCH = "« Où est la bibliothèque ? » — un café crème, s’il vous plaît ; très élégant, naïve façade."
RUSSIAN = "Съешь же ещё этих мягких французских булок, да выпей чаю. Широкая электрификация южных губерний."
JAPANESE = "日本語のテキストです。これはテストのための文章で、文字コードの検出を確認します。"


@pytest.mark.parametrize(
    ("body", "content_type", "html", "text", "charset", "source"),
    [
        (b"\xef\xbb\xbfcaf\xc3\xa9", "text/html; charset=iso-8859-1", True, "café", "utf-8", "bom"),
        (b"\xff\xfe" + "café".encode("utf-16-le"), None, False, "café", "utf-16-le", "bom"),
        (
            b"\xfe\xff" + "café".encode("utf-16-be"),
            "text/plain; charset=utf-8",
            False,
            "café",
            "utf-16-be",
            "bom",
        ),
        ("café".encode("cp1252"), "text/plain; charset=ISO-8859-1", False, "café", "cp1252", "header"),
        ("café".encode("cp1252"), 'text/html; charset="windows-1252"', True, "café", "cp1252", "header"),
        (
            ("<meta charset=koi8-r>" + RUSSIAN).encode("koi8-r"),
            None,
            True,
            "<meta charset=koi8-r>" + RUSSIAN,
            "koi8-r",
            "meta",
        ),
        (
            ('<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">' + JAPANESE).encode(
                "shift_jis"
            ),
            "text/html",
            True,
            '<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">' + JAPANESE,
            "shift_jis",
            "meta",
        ),
        (b"plain ascii", None, False, "plain ascii", "utf-8", "utf-8"),
        (FRENCH.encode(), "text/plain; charset=no-such", False, FRENCH, "utf-8", "utf-8"),
        (RUSSIAN.encode("cp1251"), "text/html", True, RUSSIAN, "cp1251", "detected"),
        (JAPANESE.encode("shift_jis"), "text/plain", False, JAPANESE, "cp932", "detected"),
        (FRENCH.encode("cp1252"), None, False, FRENCH, "cp1252", "detected"),
    ],
)
def test_decoding_paths(body, content_type, html, text, charset, source):
    """BOM beats the header, the header beats <meta>, valid UTF-8 needs no detection, else the detector decides."""
    decoded = decode(body, content_type, html=html)
    assert (decoded.text, decoded.charset, decoded.source) == (text, charset, source)


def test_meta_charset_is_only_read_for_html():
    """Plain text does not obey a <meta> tag that happens to be in it."""
    body = b"<meta charset=koi8-r> plain"
    assert decode(body, "text/plain", html=False).source == "utf-8"
    assert decode(body, "text/html", html=True).source == "meta"


def test_meta_charset_utf16_means_utf8():
    """A <meta charset=utf-16> readable as ASCII proves the page is not UTF-16: decoded as UTF-8."""
    decoded = decode("<meta charset=utf-16><p>café".encode(), None, html=True)
    assert (decoded.charset, decoded.text[-4:]) == ("utf-8", "café")


def test_binary_that_the_detector_rejects_falls_back_to_windows_1252():
    """Bytes no web encoding explains still decode (as windows-1252, every byte a character)."""
    body = bytes(range(256)) * 4
    assert detect(body) is None
    decoded = decode(body, None)
    assert decoded.source == "fallback" and decoded.charset == "cp1252"
    assert len(decoded.text) == len(body) and "\ufffd" not in decoded.text
    decoded.text.encode("utf-8")


@pytest.mark.parametrize("html", [False, True])
def test_windows_1252_decodes_its_undefined_bytes_as_browsers_do(html):
    """The five bytes Python's cp1252 leaves undefined are their C1 controls (the WHATWG Encoding
    Standard's windows-1252), so UTF-8 declared as Latin-1 (Vim's help pages) keeps every byte; other
    codecs' undecodable bytes are still U+FFFD."""
    utf8 = "∀ “x” 𝖨 Á".encode()  # has 0x81 and 0x9D among its bytes
    assert {0x81, 0x9D} <= set(utf8)
    decoded = decode(utf8, "text/html; charset=iso-8859-1", html=html)
    assert decoded.charset == "cp1252" and "\ufffd" not in decoded.text
    undone = b"".join(c.encode("cp1252") if c not in "\x81\x8d\x8f\x90\x9d" else c.encode("latin-1") for c in decoded.text)
    assert undone == utf8  # the mojibake can be undone
    assert decode(bytes([0x81, 0x8D, 0x8F, 0x90, 0x9D]), "text/plain; charset=windows-1252").text == (
        "\x81\x8d\x8f\x90\x9d"
    )
    assert decode(b"a\x98b", "text/plain; charset=windows-1253").text == "a\ufffdb"
    utf8_bytes, charset, _ = decode_utf8(b"caf\xe9 \x9d", "text/html; charset=windows-1252", html=True)
    assert (utf8_bytes.decode(), charset) == ("café \x9d", "cp1252")


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("UTF-8", "utf-8"),
        ("latin1", "cp1252"),
        ("iso-8859-1", "cp1252"),
        ("us-ascii", "cp1252"),
        ("gb2312", "gbk"),
        ("iso-8859-15", "iso8859-15"),
        ("rot13", None),
        ("base64", None),
        ("utf-7", None),
        ("unicode_escape", None),
        ("idna", None),
        ("no-such-charset", None),
    ],
)
def test_codec_names(label, expected):
    """Labels map to Python codecs, WHATWG supersets replace their subsets, non-charsets are refused."""
    assert codec_name(label) == expected


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/html; charset=UTF-8", "utf-8"),
        ("text/html;charset='latin1'", "cp1252"),
        ('text/html; foo=bar; charset = "koi8-r"', "koi8-r"),
        ("text/html", None),
        (None, None),
        ("text/html; charset=", None),
    ],
)
def test_header_charset(content_type, expected):
    """The charset parameter of a Content-Type value, quoted or not, in any case."""
    assert header_charset(content_type) == expected


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=2048), content_type=st.none() | st.text(max_size=40), html=st.booleans())
def test_any_bytes_decode_to_valid_utf8(body, content_type, html):
    """Whatever the bytes and header, decoding never raises and the text encodes as UTF-8."""
    decode(body, content_type, html=html).text.encode("utf-8")


_LABELS = st.sampled_from(
    ["utf-8", "latin1", "shift_jis", "iso-2022-jp", "iso-2022-kr", "hz", "gb2312", "big5", "utf-16", "utf-16-be",
     "utf-32", "cp037", "koi8-r", "utf-7", "base64", "nonsense", "UTF-8"]
)
_BODY_PIECES = st.sampled_from(
    [b"<p>ascii ", b"\x1b$B", b"\x1b(B", b"~{", b"~}", b"+AGEA-", b"\xef\xbb\xbf", b"\xff\xfe", b"\xc3\xa9", b"\xe9",
     b"\xef\xbf\xbd", b"\x00", b"<meta charset=", b"utf-16>", b"<meta charset='hz'>"]
)


@settings(max_examples=400, deadline=None)
@given(
    pieces=st.lists(_BODY_PIECES | st.binary(max_size=4), max_size=8),
    header=st.none() | _LABELS.map(lambda label: f"text/html; charset={label}"),
    meta=st.none() | _LABELS,
    html=st.booleans(),
)
def test_decode_utf8_is_decode_as_utf8_bytes(pieces, header, meta, html):
    """decode_utf8 gives decode()'s charset and source and its text's UTF-8 bytes, ASCII fast path or not."""
    body = (f"<meta charset={meta}>".encode() if meta else b"") + b"".join(pieces)
    text, charset, source = decode(body, header, html=html)
    assert decode_utf8(body, header, html=html) == (text.encode("utf-8"), charset, source)
