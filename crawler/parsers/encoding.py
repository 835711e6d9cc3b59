"""Bytes to text: byte-order mark, Content-Type charset, ``<meta>`` charset, then detection.

The result names the charset and where it came from, and is always a ``str``
that encodes to valid UTF-8 (undecodable bytes become U+FFFD, except windows-1252's
five undefined bytes, which become their C1 controls as in browsers). Detection
(chardet, restricted to the encodings of the modern web) runs only when nothing
declares a charset and the bytes are not valid UTF-8: it is slow next to a
decode, and a declaration, even a wrong one, is what browsers obey.
"""

from __future__ import annotations

import codecs
import functools
import re
from typing import NamedTuple

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([^\"';,\s]+)", re.I)
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([a-z0-9_.:-]+)", re.I)
META_SCAN = 2048  # bytes searched for a <meta> charset, about what browsers pre-scan
DETECT_BYTES = 64 * 1024  # bytes the detector examines; more rarely changes its answer
FALLBACK = "cp1252"  # the WHATWG default for undeclared, non-UTF-8 legacy pages
# The WHATWG Encoding Standard decodes these labels as a superset, because pages
# so labelled routinely use its extra characters (curly quotes in "iso-8859-1").
_SUPERSETS = {"iso8859-1": "cp1252", "ascii": "cp1252", "iso8859-9": "cp1254", "gb2312": "gbk"}
# Codecs Python has that are not charsets of any web page; some (utf-7, unicode-escape)
# could even smuggle lone surrogates into text that must encode as UTF-8.
_NOT_CHARSETS = frozenset({"utf-7", "unicode-escape", "raw-unicode-escape", "punycode", "idna", "undefined"})


def _c1_for_undefined(exc: UnicodeError) -> tuple[str, int]:
    """An undefined byte of windows-1252 decoded as the WHATWG Encoding Standard does: the C1 control of
    the same number (0x81, 0x8D, 0x8F, 0x90, 0x9D), as in browsers, where Python's cp1252 has none."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return chr(exc.object[exc.start]), exc.start + 1


codecs.register_error("crawler.windows-1252", _c1_for_undefined)


def _decode(body: bytes, name: str) -> str:
    # A page declared windows-1252 that is really UTF-8 (Vim's help) then keeps every byte: its text can
    # still be turned back into the original, which U+FFFD would not allow.
    return body.decode(name, "crawler.windows-1252" if name == "cp1252" else "replace")


# Every ASCII byte, then the sequences that shift a stateful codec (ISO-2022, HZ) out of ASCII.
_ASCII_SAMPLE = bytes(range(128)) + b"\x1b$B\x1b(J\x1b$)A\x1b$(C\x0e\x0f~{~}+-"


class Decoded(NamedTuple):
    text: str
    charset: str  # Python codec name
    source: str  # bom | header | meta | utf-8 | detected | fallback


@functools.lru_cache(maxsize=256)
def codec_name(label: str) -> str | None:
    """Python codec name for a charset label, or None when unknown or not a text codec."""
    try:
        name = codecs.lookup(label.strip().lower()).name
        b"a".decode(name, "replace")  # rejects pseudo-codecs such as base64 or rot13, which a page could name
    except (LookupError, ValueError, TypeError):
        return None
    if name in _NOT_CHARSETS:
        return None
    return _SUPERSETS.get(name, name)


@functools.lru_cache(maxsize=256)
def reads_ascii_as_itself(name: str) -> bool:
    """Whether the codec decodes any ASCII bytes to the same characters (not UTF-16, EBCDIC, ISO-2022)."""
    return _ASCII_SAMPLE.decode(name, "replace") == _ASCII_SAMPLE.decode("ascii")


def header_charset(content_type: str | None) -> str | None:
    if content_type and (m := _HEADER_CHARSET.search(content_type)):
        return codec_name(m.group(1))
    return None


def _meta_charset(body: bytes) -> str | None:
    if (m := _META_CHARSET.search(body, 0, META_SCAN)) is None:
        return None
    name = codec_name(m.group(1).decode("ascii"))
    if name and name.startswith(("utf-16", "utf-32")):
        return "utf-8"  # a meta tag readable as ASCII proves the page is not UTF-16/32
    return name


def detect(body: bytes) -> str | None:
    """The detector's best guess among web encodings (windows-1252 when none fits), or None for binary."""
    import chardet  # imported on first use: most pages never need it

    guess = chardet.detect(
        body[:DETECT_BYTES],
        encoding_era=chardet.EncodingEra.MODERN_WEB,
        prefer_superset=True,
        compat_names=False,
        no_match_encoding=FALLBACK,
    )
    label = guess.get("encoding")
    name = codec_name(label) if label else None
    # Without a BOM a web page is never UTF-16/32; guessing so turns Latin text into CJK.
    if name is None or name.startswith(("utf-16", "utf-32")):
        return None
    return name


def decode(body: bytes, content_type: str | None, *, html: bool = False) -> Decoded:
    """Decode ``body``; ``html`` also looks for a ``<meta>`` charset in the first 2 KB."""
    # A BOM wins over the header, as in the HTML Standard: it is evidence in the bytes
    # themselves, while a header charset is often a server-wide default.
    for bom, name in _BOMS:
        if body.startswith(bom):
            return Decoded(_decode(body[len(bom) :], name), name, "bom")
    if (name := header_charset(content_type)) is not None:
        return Decoded(_decode(body, name), name, "header")
    if html and (name := _meta_charset(body)) is not None:
        return Decoded(_decode(body, name), name, "meta")
    try:
        return Decoded(body.decode("utf-8"), "utf-8", "utf-8")
    except UnicodeDecodeError:
        pass
    if (name := detect(body)) is not None:
        return Decoded(_decode(body, name), name, "detected")
    return Decoded(_decode(body, FALLBACK), FALLBACK, "fallback")


def decode_utf8(body: bytes, content_type: str | None, *, html: bool = False) -> tuple[bytes, str, str]:
    """decode()'s text as UTF-8 bytes, with its charset and source: for a parser that reads bytes."""
    # An ASCII body (no BOM then) in a charset that reads ASCII as itself, as most pages are, is
    # its own UTF-8: checking that is half the cost of a decode, and there is no encode after.
    if body.isascii():
        name, source = header_charset(content_type), "header"
        if name is None and html:
            name, source = _meta_charset(body), "meta"
        if name is None:
            return body, "utf-8", "utf-8"
        if reads_ascii_as_itself(name):
            return body, name, source
    text, charset, source = decode(body, content_type, html=html)
    # A UTF-8 body decoded without a replacement character (free to check on a text with no
    # character above U+00FF) is those bytes.
    if charset == "utf-8" and source != "bom" and "\ufffd" not in text:
        return body, charset, source
    return text.encode("utf-8"), charset, source
