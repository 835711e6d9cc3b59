"""file: URLs: refused unless protocols.file.enabled, then read from disk with the content limit."""

from __future__ import annotations

import io

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.warcwriter import WARCWriter

from crawler.config import load_config
from crawler.errors import BlockedAddress
from crawler.protocols.file import FileProtocol
from crawler.segments.warc import warc_records


def _protocol(*overrides: str) -> FileProtocol:
    return FileProtocol(load_config(None, list(overrides)))


class TestFileProtocol:
    async def test_off_by_default(self, tmp_path):
        """Without protocols.file.enabled a file: URL is refused like a private address."""
        (tmp_path / "a.html").write_text("<html>x</html>")
        with pytest.raises(BlockedAddress):
            await _protocol().fetch((tmp_path / "a.html").as_uri())

    async def test_reads_files_and_lists_folders(self, tmp_path):
        """Enabled, a file is served with a guessed type, a folder as an HTML list of links, a missing file as 404."""
        (tmp_path / "a b.html").write_text("<html><title>A</title></html>")
        protocol = _protocol("protocols.file.enabled=true")
        page = await protocol.fetch((tmp_path / "a b.html").as_uri())
        assert (page.status, page.header("Content-Type"), page.body) == (200, "text/html",
                                                                           b"<html><title>A</title></html>")
        listing = await protocol.fetch(tmp_path.as_uri() + "/")
        assert f'href="{(tmp_path / "a b.html").as_uri()}"'.encode() in listing.body
        assert (await protocol.fetch((tmp_path / "nope").as_uri())).status == 404

    async def test_content_limit_truncates(self, tmp_path):
        """A file longer than http.content_limit is cut there and flagged, and archived marked WARC-Truncated."""
        (tmp_path / "big.txt").write_bytes(b"x" * 5000)
        page = await _protocol("protocols.file.enabled=true", "http.content_limit=1000").fetch(
            (tmp_path / "big.txt").as_uri())
        assert page.truncated and page.raw_truncated and len(page.body) == 1000
        writer = WARCWriter(io.BytesIO(), gzip=True)
        warc_records(writer, page)
        record = next(iter(ArchiveIterator(io.BytesIO(writer.out.getvalue()), check_digests="raise")))
        assert record.rec_headers.get_header("WARC-Truncated") == "length"
        assert record.content_stream().read() == b"x" * 1000
