"""WARC records of a segment's content parts: the HTTP response and request pairs, resource and warcinfo records.

``WARC-Block-Digest`` and ``WARC-Payload-Digest`` are SHA-1 over exactly the bytes stored. The HTTP
pairs, nearly every record, are written by ``http_records``: the bytes warcio writes for them (header
order included; a test holds the two byte-equal once decompressed), at a fraction of the CPU (warcio
builds each record through streams, spooled files and a digester in Python), deflated by ISA-L at its
level 1 (bodies sent compressed: stored by zlib-ng). warcio still writes warcinfo and resource records.

A module of its own, apart from the Parquet side of segments/writer.py: the parse processes of
``fetcher.parse_processes`` encode the records and import this, and not pyarrow (~70 MB of a process's
resident memory, paid once more in every such process).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import os
import random
import time
from urllib.parse import quote

from isal import isal_zlib
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter
from zlib_ng import zlib_ng

from crawler import __version__
from crawler.protocols.base import Response

# Hop-by-hop framing that no longer describes the stored (de-chunked) payload.
_DROP_HEADERS = {"transfer-encoding"}


def warcinfo_record(writer: WARCWriter, filename: str) -> None:
    info = {"software": f"crawler/{__version__}", "format": "WARC File Format 1.0",
            "description": "crawler segment content part"}
    writer.write_record(writer.create_warcinfo_record(filename, info))


# base64.b32encode is pure Python (~5 us a digest); a 160-bit digest is exactly 16 groups of 10 bits.
_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [a + b for a in _B32 for b in _B32]


def _sha1(*parts: bytes) -> str:
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part)
    n = int.from_bytes(digest.digest(), "big")
    # Written out: a loop over the 16 shifts costs half as much again (~1.5 vs ~1 us, three a request).
    p = _B32_PAIRS
    return "".join(("sha1:", p[n >> 150], p[n >> 140 & 1023], p[n >> 130 & 1023], p[n >> 120 & 1023],
                    p[n >> 110 & 1023], p[n >> 100 & 1023], p[n >> 90 & 1023], p[n >> 80 & 1023],
                    p[n >> 70 & 1023], p[n >> 60 & 1023], p[n >> 50 & 1023], p[n >> 40 & 1023],
                    p[n >> 30 & 1023], p[n >> 20 & 1023], p[n >> 10 & 1023], p[n & 1023]))


_EMPTY_SHA1 = _sha1(b"")


# A record is deflated by ISA-L (python-isal) at its level 1: on real documentation pages (1,200 pages of
# four Debian trees, 23.5 kB mean) 46 us a page for 20.8 % of its size, where zlib-ng's level 2 took 115 us
# for 20.5 % and the stdlib's zlib level 1 151 us for 21.3 % (docs/benchmarks.md, "WARC members by
# ISA-L"). A request record (~700 bytes) is smaller too: 448 bytes in 9 us against zlib-ng level 1's 516
# in 7. ISA-L has no stored level (its level 0 grows random bytes by a quarter), so a body sent compressed
# is stored by zlib-ng's level 0 at once (5 us for 13 kB, where ISA-L's level 1 spends 27 to store it).
_LEVEL = 1


def _gzip_member(*parts: bytes, stored: bool = False) -> bytes:
    """One gzip member per record, as warcio writes them."""
    # One call on the joined parts: a compressobj and a call per part cost more than the copy. Neither
    # library keeps zlib's ~256 kB of buffers per member, which malloc can hand back to the kernel on free
    # and fault in anew for the next one (~50 us for a 400-byte record).
    data = b"".join(parts)
    if stored:
        return zlib_ng.compress(data, 0, zlib_ng.MAX_WBITS + 16)
    return isal_zlib.compress(data, _LEVEL, isal_zlib.MAX_WBITS + 16)


def _http_head(protocol: str, statusline: str, headers: list[tuple[str, str]]) -> bytes:
    """The HTTP head as warcio stores it: ASCII, non-ASCII values percent-encoded (RFC 8187)."""
    try:
        # What StatusAndHeaders.to_ascii_bytes() gives for an ASCII head, without its header copy and
        # line-by-line += (~3 us a head).
        return "".join([protocol, " ", statusline, "\r\n", *[f"{k}: {v}\r\n" for k, v in headers], "\r\n"]
                       ).encode("ascii")
    except UnicodeEncodeError:
        pass
    try:
        return StatusAndHeaders(statusline, headers, protocol=protocol).to_ascii_bytes()
    except UnicodeEncodeError:
        # warcio encodes only the ``name="value"`` parts of a value with a ';', and fails on the
        # rest: such a value (a hostile or broken server) is percent-encoded whole instead. So is a
        # reason phrase that is not ASCII (warcio leaves it as it is, and fails); aiohttp hands its
        # bytes over as surrogate escapes, which go back to the bytes served.
        safe = [(k, v if v.isascii() else quote(v, errors="surrogateescape")) for k, v in headers]
        if not statusline.isascii():
            statusline = quote(statusline, safe=" ", errors="surrogateescape")
        return StatusAndHeaders(statusline, safe, protocol=protocol).to_ascii_bytes()


# WARC-Record-IDs are version 4 (random) UUID URNs. uuid.uuid4() costs an os.urandom call and a UUID
# object per ID (~3 us); these come from a Mersenne Twister seeded from os.urandom (2.5 kB of state),
# re-seeded in a forked child so that parent and child never share a stream. An ID must be unique, not
# unpredictable. Two IDs are drawn at once, each half given uuid4's version and variant bits.
_IDS = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_IDS.seed)
_V4_CLEAR = ~((0xF000 << 64 | 0xC000 << 48) * (1 | 1 << 128))
_V4_SET = (4 << 76 | 0x8000 << 48) * (1 | 1 << 128)


def _record_ids() -> tuple[str, str]:
    h = f"{_IDS.getrandbits(256) & _V4_CLEAR | _V4_SET:064x}"
    return (f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}>",
            f"<urn:uuid:{h[32:40]}-{h[40:44]}-{h[44:48]}-{h[48:52]}-{h[52:]}>")


@functools.lru_cache(maxsize=1)
def _warc_date(second: int) -> str:
    """WARC-Date to the second (as warcio writes it), formatted once a second rather than per record."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def http_records(response: Response) -> bytes:
    """The response record and its request record (gzipped), byte for byte what warcio writes for them."""
    path = response.url.split("/", 3)[3] if response.url.count("/") >= 3 else ""
    request_http = _http_head("GET", f"/{path} HTTP/1.1", response.request_headers)
    headers = [(k, v) for k, v in response.headers if k.lower() not in _DROP_HEADERS]
    response_http = _http_head(f"HTTP/{response.http_version}", f"{response.status} {response.reason}".strip(),
                               headers)
    body = response.raw_body
    date = _warc_date(int(time.time()))
    response_id, request_id = _record_ids()
    extra = ""
    if response.peer_ip:
        extra += f"WARC-IP-Address: {response.peer_ip}\r\n"
    if response.raw_truncated:  # the payload as served was cut, not just its decoded copy
        extra += "WARC-Truncated: length\r\n"
    response_head = (
        f"WARC/1.0\r\n{extra}WARC-Type: response\r\nWARC-Record-ID: {response_id}\r\n"
        f"WARC-Target-URI: {response.url}\r\nWARC-Date: {date}\r\n"
        f"WARC-Payload-Digest: {_sha1(body)}\r\nWARC-Block-Digest: {_sha1(response_http, body)}\r\n"
        f"Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(response_http) + len(body)}\r\n\r\n"
    ).encode()
    request_head = (
        f"WARC/1.0\r\nWARC-Type: request\r\nWARC-Record-ID: {request_id}\r\n"
        f"WARC-Target-URI: {response.url}\r\nWARC-Date: {date}\r\nWARC-Concurrent-To: {response_id}\r\n"
        f"WARC-Payload-Digest: {_EMPTY_SHA1}\r\nWARC-Block-Digest: {_sha1(request_http)}\r\n"
        f"Content-Type: application/http; msgtype=request\r\n"
        f"Content-Length: {len(request_http)}\r\n\r\n"
    ).encode()
    # A body sent gzip (br, zstd...) does not shrink: deflate would search it for matches and then store
    # it as it is anyway; stored at once, it is the same size.
    stored = response.header("Content-Encoding") not in (None, "", "identity")
    return (_gzip_member(response_head, response_http, body, b"\r\n\r\n", stored=stored)
            + _gzip_member(request_head, request_http, b"\r\n\r\n"))


def as_served(response: Response) -> Response:
    """``response`` without its decoded body: the archive keeps the bytes as served, and past parsing the
    decoded copy is only memory (or pickling) to pay for."""
    if response.body is not response.raw_body and response.body:
        return dataclasses.replace(response, body=b"")
    return response


def warc_records(writer: WARCWriter, response: Response | bytes) -> None:
    if isinstance(response, bytes):  # encoded by a parse process (crawler/fetcher/parsepool.py)
        writer.out.write(response)
        return
    if response.url.startswith(("http:", "https:")):
        writer.out.write(http_records(response))
        return
    ctype = response.header("Content-Type") or "application/octet-stream"
    writer.write_record(writer.create_warc_record(
        response.url, "resource", payload=io.BytesIO(response.raw_body), warc_content_type=ctype,
        length=len(response.raw_body), warc_headers_dict={"WARC-Truncated": "length"} if response.raw_truncated else None))
