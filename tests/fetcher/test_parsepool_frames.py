"""The parse pool's job frames: a response crosses the pipe with every field, its bodies beside the pickle."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pickle
import threading

from crawler.fetcher.parsepool import (
    _MIN_READ,
    _PIPE_BYTES,
    _job_frames,
    _JobReader,
    _Link,
    _page_job,
    _page_response,
    _pipe,
    _write_all,
)
from crawler.protocols.base import Response
from crawler.segments.warc import as_served


def _response(raw: bytes, body: bytes) -> Response:
    return Response(url="http://127.0.0.1:8080/a", status=200, reason="OK", headers=[("Content-Encoding", "gzip")],
                    raw_body=raw, body=body, truncated=True, raw_truncated=True, http_version="1.0",
                    request_headers=[("User-Agent", "t")], peer_ip="127.0.0.1", elapsed=0.25)


def _through_pipe(frames: list[bytes]) -> tuple:
    receiver, sender = _pipe()
    got: list[tuple] = []
    reader = threading.Thread(target=lambda: got.extend(_JobReader(receiver.fileno()).jobs(1)))
    reader.start()  # read while writing: a job may be larger than the pipe
    _write_all(sender.fileno(), [piece for data in frames for piece in (len(data).to_bytes(4, "big"), data)])
    reader.join()
    receiver.close()
    sender.close()
    job, body_bytes = got[0]
    # the byte count a parse process trims by is the bodies' bytes, not the pickled head's
    assert body_bytes == sum(map(len, frames[1:]))
    return job


def _wire(jobs: list[list[bytes]]) -> bytes:
    return b"".join(len(data).to_bytes(4, "big") + data for frames in jobs for data in frames)


class TestJobReader:
    def test_jobs_read_in_pieces_arrive_whole_in_order_and_batched(self):
        """Jobs that reach the pipe a few bytes at a time come out whole, in order, at most ``most`` at once."""
        sent = [_job_frames(("rows", i, f"http://h/{i}", "text/html"), [bytes([i]) * (i * 37)]) for i in range(12)]
        receiver, sender = _pipe()
        wire = _wire(sent)

        def trickle() -> None:
            for at in range(0, len(wire), 7):
                os.write(sender.fileno(), wire[at:at + 7])
            sender.close()

        writer = threading.Thread(target=trickle)
        writer.start()
        reader, batches = _JobReader(receiver.fileno()), []
        while batch := reader.jobs(5):
            assert 1 <= len(batch) <= 5
            batches.append(batch)
        writer.join()
        receiver.close()
        got = [job for batch in batches for job in batch]
        assert [job for job, _ in got] == [("rows", i, f"http://h/{i}", "text/html", bytes([i]) * (i * 37))
                                           for i in range(12)]
        assert [size for _, size in got] == [i * 37 for i in range(12)]

    def test_a_job_cut_by_the_close_is_dropped_after_the_whole_ones(self):
        """When the sender goes mid-job, the jobs before it are answered and then the reader ends."""
        whole = _job_frames(("rows", 1, "http://h/1", None), [b"a" * 100])
        cut = _wire([_job_frames(("rows", 2, "http://h/2", None), [b"b" * 100])])[:-10]
        receiver, sender = _pipe()
        os.write(sender.fileno(), _wire([whole]) + cut)
        sender.close()
        reader = _JobReader(receiver.fileno())
        assert reader.jobs(32) == [(("rows", 1, "http://h/1", None, b"a" * 100), 100)]
        assert reader.jobs(32) == []
        receiver.close()

    def test_a_job_larger_than_the_buffer_grows_it_and_the_buffer_shrinks_back(self):
        """A page larger than the reader's buffer arrives whole; the buffer returns to its size after it."""
        big = _job_frames(("rows", 1, "http://h/big", None), [os.urandom(3 * _PIPE_BYTES + 5)])
        small = _job_frames(("rows", 2, "http://h/small", None), [b"s"])
        receiver, sender = _pipe()
        writer = threading.Thread(target=lambda: (_write_all(sender.fileno(), [
            piece for data in big + small for piece in (len(data).to_bytes(4, "big"), data)]), sender.close()))
        writer.start()
        reader = _JobReader(receiver.fileno())
        (job, size), = reader.jobs(1)
        assert job[:4] == ("rows", 1, "http://h/big", None) and job[4] == big[1] and size == len(big[1])
        assert len(big[1]) < len(reader.buf) < len(big[1]) + 2 * _MIN_READ  # room for the page, not twice it
        assert [job for job, _ in reader.jobs(32)] == [("rows", 2, "http://h/small", None, b"s")]
        assert reader.jobs(32) == [] and len(reader.buf) == _PIPE_BYTES
        writer.join()
        receiver.close()


class TestJobFrames:
    def test_a_parsed_page_arrives_with_every_field(self):
        """A page to parse arrives as the response sent: every field, raw and decoded bodies."""
        sent = _response(b"\x1f\x8b raw" * 50_000, b"<html>decoded</html>" * 40_000)
        kind, key, url, meta, ctype, parse, sitemaps, links, *bodies = _through_pipe(
            _page_job(7, sent.url, sent, "text/html", True, ["http://127.0.0.1:8080/sitemap.xml"], True))
        got = _page_response(meta, bodies)
        assert (kind, key, url, ctype, parse, sitemaps, links) == (
            "page", 7, sent.url, "text/html", True, ["http://127.0.0.1:8080/sitemap.xml"], True)
        assert [getattr(got, f.name) for f in dataclasses.fields(Response)] == [
            getattr(sent, f.name) for f in dataclasses.fields(Response)]

    def test_an_archived_only_page_arrives_as_served(self):
        """A page not parsed arrives as ``as_served`` leaves it: without its decoded copy."""
        sent = _response(b"raw" * 1000, b"decoded" * 1000)
        *_, meta, _ctype, _parse, _sitemaps, _links, raw, body = _through_pipe(
            _page_job(1, sent.url, sent, None, False, [], False))
        got = _page_response(meta, [raw, body])
        assert dataclasses.astuple(got) == dataclasses.astuple(as_served(sent))
        assert got.body == b""

    def test_a_body_that_is_the_raw_body_goes_once(self):
        """An identity-encoded page sends its body once and arrives with body and raw body one object."""
        body = b"<html>same</html>" * 100
        sent = _response(body, body)
        frames = _page_job(2, sent.url, sent, "text/html", True, [], False)
        assert len(frames) == 2  # the pickled head and one body
        *_, meta, _ctype, _parse, _sitemaps, _links, raw = _through_pipe(frames)
        got = _page_response(meta, [raw])
        assert got.body is got.raw_body and got.body == body

    def test_more_frames_than_one_writev_takes(self):
        """Over IOV_MAX frames in one send all arrive, in order."""
        receiver, sender = _pipe()
        frames = [i.to_bytes(4, "big") * (i % 7) for i in range(3000)]
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.extend(receiver.recv_bytes() for _ in frames))
        reader.start()
        _write_all(sender.fileno(), [piece for data in frames for piece in (len(data).to_bytes(4, "big"), data)])
        reader.join()
        receiver.close()
        sender.close()
        assert got == frames

    async def test_an_answer_read_in_pieces_wakes_its_caller_once_whole(self):
        """An answer that reaches the pipe in two pieces resolves its future when complete, the next in turn."""
        jobs, job_sender = _pipe()
        replies, reply_sender = _pipe()
        link = _Link("test", job_sender, replies)
        first, second = link.call(1, [b"job 1"]), link.call(2, [b"job 2"])
        await asyncio.sleep(0)  # the jobs go out, and the link starts reading the answers
        assert jobs.recv_bytes() == b"job 1" and jobs.recv_bytes() == b"job 2"
        answers = [pickle.dumps([(1, "one", None)]), pickle.dumps([(2, "two", None)])]
        wire = b"".join(len(a).to_bytes(4, "big") + a for a in answers)
        cut = 4 + len(answers[0]) + 3  # the second answer's length, in part
        os.write(reply_sender.fileno(), wire[:cut])
        assert await first == "one"
        assert not second.done()
        os.write(reply_sender.fileno(), wire[cut:])
        assert await second == "two"
        assert link.in_pipe == 0 and not link.reading
        for conn in (jobs, job_sender, replies, reply_sender):
            conn.close()
