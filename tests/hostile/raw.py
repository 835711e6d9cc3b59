"""Raw asyncio servers for the answers no HTTP framework will send: silence, trickles, resets, broken headers.

Each server reads a request head, logs its path, answers ``/robots.txt`` with a
plain 404 (so the crawler gets as far as the page), and treats every other path
with its ``behaviour``. The bytes are written by hand, so what the crawler sees
is exactly what a broken server on the web sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable

NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

# behaviour name -> what the page request gets (the writer is closed afterwards unless it hangs).
BEHAVIOURS = ("hang", "trickle", "reset", "bad_header", "bad_status", "huge_header", "endless_headers")


class RawServer:
    """A TCP server on ``host`` (port 0) that answers page requests with ``behaviour``."""

    def __init__(self, host: str, behaviour: str, log: Callable[[str, str], None]) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}; one of {BEHAVIOURS}")
        self.host = host
        self.behaviour = behaviour
        self.log = log
        self.server: asyncio.Server | None = None
        self.port = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode("latin-1") if head.count(b" ") >= 2 else "?"
            self.log(f"{self.host}", path)
            if path == "/robots.txt":
                writer.write(NOT_FOUND)
            else:
                await getattr(self, f"_{self.behaviour}")(writer)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _hang(self, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()  # accepted, read, never answered

    async def _trickle(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n")
        while not writer.is_closing():  # one byte a second: every read succeeds, the whole never arrives
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(1.0)

    async def _reset(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n")
        writer.write(b"<html><title>cut</title>" + b"y" * 4000)
        await writer.drain()
        sock = writer.get_extra_info("socket")
        # SO_LINGER 0: close() sends RST instead of FIN, mid-body.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def _bad_header(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nBad\x00Header: \x01\x02\r\nno colon here\r\n\r\nhello")

    async def _bad_status(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 2x0 WHAT\r\nContent-Length: 5\r\n\r\nhello")

    async def _huge_header(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Huge: " + b"h" * (1 << 20) + b"\r\n\r\nhello")

    async def _endless_headers(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\n")
        for i in range(1_000_000):  # headers that never end (the client must give up, not buffer)
            if writer.is_closing():
                return
            writer.write(b"X-H%d: v\r\n" % i)
            if i % 1000 == 0:
                await writer.drain()
