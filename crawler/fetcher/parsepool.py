"""Parse pages in worker processes, off the fetch process (``fetcher.parse_processes``).

Parsing and encoding a page's records (its text and outlinks, its WARC
records gzipped and digested) are the CPU cost of a page besides HTTP itself
(DESIGN 3): done in the fetch process they serialise with fetching on one
core. A ParsePool keeps ``fetcher.parse_processes`` parse processes alive,
forks of a fork server the command started first thing
(crawler/fetcher/forkserver.py), so a pool is ready in ~0.1 s; the server then
ends, and the pool reaps its processes itself; ``crawler crawl``
starts one for each fetch and ends it before updatedb (runner.py
``RoundsPool.release``).

A page crosses processes once each way: the fetch process sends the response
to a parse process, which parses it, encodes its WARC records and answers with
them, the parse rows and the parse status; the fetch process keeps them for
its partition's next part, which it writes in a thread (segments/writer.py), as
it writes the parts of pages parsed in it. Everything goes through plain pipes
read from the event loop (``add_reader``): no feeder or manager threads, one
pickle per page each way. A page's bodies go beside its pickle as frames of
their own, written from the response's bytes by the same ``writev``: pickled,
each body would be copied into the pickle first. (A ProcessPoolExecutor here
cost the fetch process more CPU per page than parsing in it: its two threads
and the text crossing twice.)

Until 2026-12-04 the parts were written by a part-writer process of the pool,
which the parse processes sent the records and rows to: its own interpreter and
Arrow (~58 MB resident before its first page) were a seventh of the crawl's
summed memory, while the fetch process, which has Arrow loaded for the webdb
jobs anyway, had CPU to spare (docs/benchmarks.md, "The part writer joins the
fetch process").
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import pickle
import signal
import struct
from collections import deque
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, NamedTuple

from crawler.errors import CrawlerError
from crawler.fetcher import forkserver
from crawler.fetcher.outlinks import same_origin_links
from crawler.fetcher.records import add_robots_sitemaps, body_digest
from crawler.memory import collect_for_pages, trim
from crawler.parsers.dispatch import ParserDispatch
from crawler.parsers.rows import parse_rows
from crawler.protocols.base import Response
from crawler.segments.warc import as_served, http_records

if TYPE_CHECKING:  # the pool's processes get the config's values (config.plain), never its models: no pydantic
    import asyncio

    from crawler.config import CrawlerConfig

Rows = tuple[dict[str, Any], dict[str, Any], str]  # parse_text row, parse_data row, parse status


class PageAnswer(NamedTuple):
    """A parse process's answer for a page: what its fetch records and writes of it."""

    status: str | None  # the parse status; None if the page was not parsed (not a success) or its parser raised
    digest: str | None  # the body's MD5 (a success's)
    error: str | None  # the parse error, if the parse failed (the page is archived all the same)
    links: list[str]  # its same-origin outlinks, when the fetch asked for them to follow
    archived: Response | bytes  # what the part archives for it (``archived``)
    parse_text: dict[str, Any] | None  # its text as UTF-8 bytes (_text_as_utf8)
    parse_data: dict[str, Any] | None


# A pipe this large (Linux's default /proc/sys/fs/pipe-max-size) holds ~30 pages of ~30 kB: the fetch
# process never sends more than it holds, so a send never blocks the event loop.
_PIPE_BYTES = 1 << 20
_MAX_BATCH = 32
# A parse process hands its freed heap back to the kernel after a batch with a page this large, or once
# this many bytes were parsed since it last did: the tree of a 2.5 MB page left ~33 MB resident in the
# heap after it was freed, and two parse processes sat at ~110 MB each instead of ~55 for the rest of a
# crawl (docs/benchmarks.md, "Parse processes give back big pages' heap; outlinks as tuples"). A trim
# costs ~0.3 ms, ~3 ms after such a page.
_TRIM_PAGE = 1 << 20
_TRIM_EVERY = 64 << 20
# Pages this large all go to the first live parse process: a page's tree takes ~13 times its HTML (a 3.8 MB
# page held ~50 MB more while parsed), and when each process of the pool held such a tree at once (the same
# big page at two addresses, or two big pages in a row) their peaks added up: with this, at most one tree of
# a page above it exists at a time (docs/benchmarks.md).
_BIG_PAGE = 1 << 20
_LENGTH = struct.Struct("!i")
_MIN_READ = 64 << 10  # a parse process reads its job pipe into at least this much room (_JobReader)


def parse_to_rows(dispatch: ParserDispatch, body: bytes, url: str, content_type: str | None) -> Rows:
    parsed = dispatch.parse(body, url, content_type)
    parse_text, parse_data = parse_rows(url, parsed)
    return parse_text, parse_data, parsed.status


def archived(response: Response) -> Response | bytes:
    """What a part archives for a response: its WARC records, or (not HTTP) the response for warcio."""
    if response.url.startswith(("http:", "https:")):
        return http_records(response)
    return as_served(response)


def _pipe() -> tuple[Connection, Connection]:
    receiver, sender = forkserver.context().Pipe(duplex=False)
    with contextlib.suppress(OSError):  # a lower pipe-max-size: the default 64 kB, sends just block sooner
        fcntl.fcntl(sender.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    return receiver, sender


def _transportable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any exception that does not survive the trip is told by its repr
        return CrawlerError(repr(exc))
    return exc


def _job_frames(head: tuple[Any, ...], bodies: list[bytes]) -> list[bytes]:
    """A job as frames: its pickled head (ending in how many bodies follow), then the bodies as they are."""
    return [pickle.dumps((*head, len(bodies)), protocol=5), *bodies]


def _frame_data(buf: bytearray, at: int, end: int) -> tuple[int, int] | None:
    """(start, stop) in ``buf`` of the data of the frame at ``at``, as ``send_bytes`` frames it (its length
    first); None while its length is not all read (``buf[:end]``). A stop past ``end``: not all read yet."""
    if end - at < 4:
        return None
    (size,) = _LENGTH.unpack_from(buf, at)
    return at + 4, at + 4 + size


class _JobReader:
    """The parse process's end of its job pipe, read in bulk: each read takes what the pipe holds (as much
    as the buffer has room for, ``_PIPE_BYTES`` when empty: ~30 pages), split into jobs here.

    ``Connection.recv_bytes`` took two reads a frame and copied each frame through a BytesIO, and a batch
    asked ``poll`` before each job: 35-54 us of a parse process's CPU a 30 kB page against 18-43 this way
    (docs/benchmarks.md, "The job pipe read in bulk"). A frame's length comes first, as send_bytes writes it.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray(_PIPE_BYTES)  # read into in place; bodies are copied out of it
        self.start = self.end = 0  # the bytes read and not yet taken as jobs
        self.want = 0  # where the frame being waited for ends, when its length is read
        self.eof = False

    def jobs(self, most: int) -> list[tuple[tuple[Any, ...], int]]:
        """At least one job (waiting for it), and every other whole job already read, up to ``most``: each as
        ``(head fields..., bodies...)`` with its bodies' bytes. [] once the pipe is closed; a job cut by the
        close is dropped, as its sender is gone."""
        got: list[tuple[tuple[Any, ...], int]] = []
        while True:
            while len(got) < most and (job := self._take()) is not None:
                got.append(job)
            if got or self.eof:
                return got
            self._read()

    def _read(self) -> None:
        buf = self.buf
        if self.start == self.end:
            self.start = self.end = self.want = 0
            if len(buf) > _PIPE_BYTES:  # grown for a big page: back to its size, for trim() to give back
                buf = self.buf = bytearray(_PIPE_BYTES)
        if len(buf) - self.end < _MIN_READ or len(buf) < self.want:
            if self.start:  # what is left of a job to the front
                kept = self.end - self.start
                buf[:kept] = buf[self.start:self.end]
                self.want = max(self.want - self.start, 0)
                self.start, self.end = 0, kept
            # A job larger than the buffer: room for the frame waited for, not more (a page's bodies are at
            # most twice http.content_limit: raw and decoded).
            if len(buf) - self.end < _MIN_READ or len(buf) < self.want:
                buf.extend(bytes(max(self.want, self.end + _MIN_READ) - len(buf)))
        with memoryview(buf) as view:
            read = os.readv(self.fd, [view[self.end:]])
        self.eof = read == 0
        self.end += read

    def _frame(self, at: int) -> tuple[int, int] | None:
        """Where the frame at ``at`` has its data (start, end) if it is all read."""
        if (span := _frame_data(self.buf, at, self.end)) is None:
            return None
        if span[1] > self.end:
            self.want = span[1]
            return None
        return span

    def _take(self) -> tuple[tuple[Any, ...], int] | None:
        """The job at the front if it is all read (its pickled head, which ends in how many bodies follow,
        then the bodies), taken off the buffer; else None."""
        if (head := self._frame(self.start)) is None:
            return None
        with memoryview(self.buf) as view:
            *fields, count = pickle.loads(view[head[0]:head[1]])
        at, spans = head[1], []
        for _ in range(count):
            if (span := self._frame(at)) is None:
                return None
            spans.append(span)
            at = span[1]
        with memoryview(self.buf) as view:
            bodies = [bytes(view[a:b]) for a, b in spans]
        self.start = at
        return (*fields, *bodies), sum(map(len, bodies))


def _page_job(key: int, url: str, response: Response, content_type: str | None, parse: bool,
              sitemaps: list[str], links: bool) -> list[bytes]:
    # The fields as ``as_served`` would leave them: a body that is the raw body (sent identity-encoded)
    # goes once; past parsing a decoded copy is not archived, so it does not go.
    r = response
    same = r.body is r.raw_body
    meta = (r.url, r.status, r.reason, r.headers, r.truncated, r.http_version, r.request_headers, r.peer_ip,
            r.elapsed, r.raw_truncated)
    bodies = [r.raw_body] if same else [r.raw_body, r.body if parse or not r.body else b""]
    return _job_frames(("page", key, url, meta, content_type, parse, sitemaps, links), bodies)


def _page_response(meta: tuple[Any, ...], bodies: tuple[bytes, ...]) -> Response:
    url, status, reason, headers, truncated, http_version, request_headers, peer_ip, elapsed, raw_truncated = meta
    raw_body = bodies[0]
    return Response(url=url, status=status, reason=reason, headers=headers, raw_body=raw_body,
                    body=bodies[1] if len(bodies) > 1 else raw_body, truncated=truncated,
                    http_version=http_version, request_headers=request_headers, peer_ip=peer_ip, elapsed=elapsed,
                    raw_truncated=raw_truncated)


def _parse_worker(cfg: Any, jobs: Connection, replies: Connection, ready: Connection) -> None:
    """A parse process: pages in; their parse status, rows and WARC records back.

    It takes every job already waiting (up to ``_MAX_BATCH``) and answers them with one message: when
    pages come fast, the wake-ups and pipe calls are shared.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the process group; the fetch process decides
    _lower_priority(cfg.fetcher.parse_nice)
    dispatch = ParserDispatch(cfg)
    max_outlinks = cfg.db.max_outlinks
    collect_for_pages()  # as the fetch process's while it fetches (a page's job: 8.78M -> 8.66M instructions)
    ready.send_bytes(b"")  # imports done: a fetch that parses in its own process meanwhile may hand pages over now
    ready.close()
    since_trim = 0
    reader = _JobReader(jobs.fileno())
    while True:
        # When the fetch process closes the pool, what it sent is answered first; then the reader gives [].
        if not (received := reader.jobs(_MAX_BATCH)):
            return
        answers = [_job(dispatch, job, max_outlinks) for job, _ in received]
        replies.send_bytes(pickle.dumps(answers, protocol=5))
        del answers
        sizes = [size for _, size in received]
        since_trim += sum(sizes)
        if since_trim >= _TRIM_EVERY or max(sizes) >= _TRIM_PAGE:
            trim()
            since_trim = 0


def _lower_priority(increment: int) -> None:
    """Run this process ``increment`` nice levels below the one it was started at (``fetcher.parse_nice``).

    The fetch process is woken by every response and every answer, and each page it hands out wakes a parse
    process; at one priority the woken process often took the core from it. Lower, a parse process still
    gets every cycle the fetch process leaves, and gives the core back as soon as the fetch process wakes.
    Raising a niceness needs no privilege; where the platform has none, the processes run as they are.
    """
    if increment > 0 and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(increment)


def _job(dispatch: ParserDispatch, job: tuple[Any, ...], max_outlinks: int) -> Any:
    kind, key = job[0], job[1]
    try:
        if kind == "rows":
            _, _, url, ctype, body = job
            return key, parse_to_rows(dispatch, body, url, ctype), None
        _, _, url, meta, ctype, parse, sitemaps, want_links, *bodies = job
        response = _page_response(meta, bodies)
        parse_text = parse_data = status = digest = error = None
        if parse:
            digest = body_digest(response.body)
            try:
                parse_text, parse_data, status = parse_to_rows(dispatch, response.body, url, ctype)
                _text_as_utf8(parse_text)
            except CrawlerError as exc:  # the page is archived all the same, without parse rows
                error = str(exc)
            if status == "success" and sitemaps:
                add_robots_sitemaps(parse_data, sitemaps)
        # With ``want_links`` its same-origin outlinks, for the fetch to follow in this round (follow.py).
        links = same_origin_links(parse_data["outlinks"], url, max_outlinks) if want_links and status == "success" else []
        return key, PageAnswer(status, digest, error, links, archived(response), parse_text, parse_data), None
    except Exception as exc:  # noqa: BLE001 - the fetch process handles it as if raised there
        return key, None, _transportable(exc)


def _text_as_utf8(parse_text: dict[str, Any]) -> None:
    """The row's text as the UTF-8 bytes Arrow stores (it takes them for a string column, and checks them).

    Pickled, a str is encoded to UTF-8 here all the same; sent as bytes, the fetch process unpickles it with a
    copy instead of a decode, and Arrow takes it with a copy instead of an encode (which a str also keeps
    cached beside itself while its part waits): 11 against 25 us a page's text there (docs/benchmarks.md).
    """
    if isinstance(text := parse_text.get("text"), str):
        parse_text["text"] = text.encode("utf-8", "replace")  # a lone surrogate (no parser's text has one) as "?"


def _write_all(fd: int, frames: list[bytes]) -> None:
    first = 0  # frames before it are written (an index: popping the front of a long list is quadratic)
    while first < len(frames):
        written = os.writev(fd, frames[first:first + 1024])  # IOV_MAX
        while first < len(frames) and written >= len(frames[first]):
            written -= len(frames[first])
            first += 1
        if written:
            frames[first] = frames[first][written:]


# The fetch side's imports (asyncio in _Link, concurrent.futures here) are made on use: this module is what
# the fork server preloads, and the pool's processes (forks of it) run no event loop. They were ~3 MB
# resident in the server and again in each process forked from it (docs/benchmarks.md).
def _broken(message: str) -> Exception:
    from concurrent.futures.process import BrokenProcessPool

    return BrokenProcessPool(message)


class _Link:
    """A pipe pair to one child, driven from the event loop: sends never block, answers wake futures."""

    def __init__(self, name: str, jobs: Connection, replies: Connection) -> None:
        import asyncio  # a link is the fetch side's: see _broken

        self._running_loop = asyncio.get_running_loop
        self.name = name
        self.jobs, self.replies = jobs, replies
        self.sizes: dict[int, int] = {}  # sent, not yet answered (they may outlive an event loop)
        self.futures: dict[int, asyncio.Future[Any]] = {}
        self.queued: deque[tuple[int, list[bytes], int]] = deque()  # key, frames, size
        self.waiting = 0  # the bytes of the messages queued
        self.inbox = bytearray()  # answers read, the last one maybe in part (kept from loop to loop)
        os.set_blocking(replies.fileno(), False)  # read only when the loop says it is readable
        self.in_pipe = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.reading = False
        self.flushing = False
        self.dead = False

    def call(self, key: int, message: list[bytes]) -> asyncio.Future[Any]:
        """Send a message (its frames, each read by one ``recv_bytes``); the future of its answer."""
        loop = self._running_loop()
        if loop is not self.loop:  # a new round of `crawl` runs a new event loop; the old one is gone
            self.loop, self.futures, self.queued, self.reading, self.flushing = loop, {}, deque(), False, False
            self.waiting = 0
        if self.dead:
            raise _broken(f"the {self.name} process died")
        future: asyncio.Future[Any] = loop.create_future()
        self.futures[key] = future
        size = sum(map(len, message)) + 4 * len(message)
        self.queued.append((key, message, size))
        self.waiting += size
        if not self.flushing:  # the jobs of one turn of the loop go out in one write
            self.flushing = True
            loop.call_soon(self._send)
        return future

    def _send(self) -> None:
        self.flushing = False
        frames: list[bytes] = []
        while self.queued:
            key, message, size = self.queued[0]
            if self.in_pipe and self.in_pipe + size > _PIPE_BYTES:
                break
            self.queued.popleft()
            self.waiting -= size
            for data in message:
                frames += [_LENGTH.pack(len(data)), data]  # Connection.send_bytes's framing, for recv_bytes
            self.sizes[key] = size
            self.in_pipe += size
        try:
            _write_all(self.jobs.fileno(), frames)
        except OSError:
            self._died()
            return
        if self.sizes and not self.reading:
            assert self.loop is not None
            self.loop.add_reader(self.replies.fileno(), self._answers)
            self.reading = True

    def _answers(self) -> None:
        # What the pipe holds, read at once from the non-blocking end and split into messages here:
        # ``poll`` and ``recv_bytes`` cost a selector and two reads for each message, in Python.
        ended = False
        try:
            while True:
                data = os.read(self.replies.fileno(), _PIPE_BYTES)
                if not data:
                    ended = True
                    break
                self.inbox += data
                if len(data) < _PIPE_BYTES:
                    break
        except BlockingIOError:
            pass
        except OSError:
            ended = True
        inbox, start = self.inbox, 0
        while (span := _frame_data(inbox, start, len(inbox))) is not None and span[1] <= len(inbox):
            answers = pickle.loads(inbox[span[0]:span[1]])
            start = span[1]
            for key, result, exc in answers:
                self.in_pipe -= self.sizes.pop(key, 0)
                future = self.futures.pop(key, None)
                if future is None or future.done():
                    continue
                if exc is not None:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
        del inbox[:start]
        if ended:
            self._died()
            return
        self._send()
        if not self.sizes and self.reading:
            assert self.loop is not None
            self.loop.remove_reader(self.replies.fileno())
            self.reading = False

    def _died(self) -> None:
        self.dead = True
        if self.reading and self.loop is not None:
            self.loop.remove_reader(self.replies.fileno())
            self.reading = False
        for future in self.futures.values():
            if not future.done():
                future.set_exception(_broken(f"the {self.name} process died"))
        self.futures, self.queued, self.sizes, self.in_pipe, self.waiting = {}, deque(), {}, 0, 0


class ParsePool:
    """Parse processes; ``await pool.page(...)`` / ``await pool.parse(...)`` from any event loop."""

    def __init__(self, cfg: CrawlerConfig, processes: int) -> None:
        from crawler.config import plain  # the fetch process has the models; the pool's processes get values

        settings = plain(cfg)
        self.processes = processes
        forkserver.ensure_running()
        context = forkserver.context()
        self._keys = itertools.count()
        # A pipe each, not a multiprocessing Event: a pool then holds no semaphore, which the resource tracker
        # would follow (forkserver.stop ends the tracker between rounds).
        self._ready: list[Connection] = []
        self._up = False
        self._children: list[Any] = []
        self._parsers: list[_Link] = []
        ends: list[Connection] = []
        for i in range(processes):
            jobs, job_sender = _pipe()
            replies, reply_sender = _pipe()
            ready, ready_sender = _pipe()
            self._ready.append(ready)
            self._children.append(context.Process(target=_parse_worker, name=f"parse-{i}", daemon=True,
                                                  args=(settings, jobs, reply_sender, ready_sender)))
            self._parsers.append(_Link(f"parse-{i}", job_sender, replies))
            ends += [jobs, reply_sender, ready_sender]
        with forkserver.safe_path():  # a server that died since ensure_running is restarted by start()
            for child in self._children:
                child.start()
        forkserver.stop_tracker()
        for end in ends:  # the children hold them now; closed here, a child's death reads as EOF
            end.close()
        # The server's work for this pool is done: it goes, and this process reaps the pool's processes.
        self._adopted = forkserver.hand_over()

    def ready(self) -> bool:
        """Whether a parse process has done its imports (a page sent before waits for them)."""
        if not self._up:
            for ready in self._ready:
                with contextlib.suppress(EOFError, OSError):  # one that died in its imports is not ready
                    if ready.poll():
                        ready.recv_bytes()
                        self._up = True
                        break
        return self._up

    async def page(self, url: str, response: Response, content_type: str | None, parse: bool,
                   sitemaps: list[str], links: bool = False) -> PageAnswer:
        """Hand a response to the pool: its WARC records and, if ``parse`` (a success), its parse (the page is
        archived even if its parse failed) and, with ``links``, its same-origin outlinks."""
        key = next(self._keys)
        job = _page_job(key, url, response, content_type, parse, sitemaps, links)
        answer: PageAnswer = await self._pick(len(response.body) if parse else 0).call(key, job)
        return answer

    async def parse(self, body: bytes, url: str, content_type: str | None) -> Rows:
        """Parse in a parse process and return the rows."""
        key = next(self._keys)
        result: Rows = await self._pick(len(body)).call(key, _job_frames(("rows", key, url, content_type), [body]))
        return result

    def _pick(self, size: int) -> _Link:
        """The parse process for a page of ``size`` bytes: the least busy, or for a big page the first live one."""
        if len(self._parsers) == 1 and not self._parsers[0].dead:  # a pool of one: no list, no min
            return self._parsers[0]
        live = [link for link in self._parsers if not link.dead]
        if not live:
            raise _broken("every parse process died")
        if size >= _BIG_PAGE:
            return live[0]
        # All it was given and has not answered: its pipe holds at most _PIPE_BYTES and the rest waits in its
        # queue. Counted by the pipe alone, a process with a long queue behind a full pipe looked no busier than
        # one with nothing queued, and got more: in a crawl of Django's tree one parse process did 0.98 CPU s and
        # the other 0.53, the two cores 88 % busy in the fetch (96 % since). Keeping the last process picked
        # until it had 256 kB or 1 MB more than the other was faster on single trees but slower on the
        # real-page web, where it left one process short of work (docs/benchmarks.md).
        return min(live, key=lambda link: link.in_pipe + link.waiting)

    def close(self) -> None:
        for link in self._parsers:
            link.jobs.close()  # EOF: each child finishes what it was sent, then exits
        for child in self._children:
            if self._adopted:  # multiprocessing learnt exit codes from the server, which is gone
                forkserver.reap(child.pid, timeout=30)
                continue
            child.join(timeout=30)
            if child.is_alive():
                child.terminate()
                child.join()
        for link in self._parsers:
            link.replies.close()
        for ready in self._ready:
            ready.close()

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
