"""The system's trusted certificates, loaded at a TLS context's first handshake instead of when it is made.

aiohttp builds two TLS contexts when it is imported (``aiohttp.connector``): a verifying one, which
reads the system's certificate store, and a non-verifying one, which sets the store's default paths,
which OpenSSL 3 also reads then. That was ~75 ms of every command whose modules import aiohttp
(``crawl``, ``fetch``, the daemon) before its first request, most of it for a crawl that never opens
an HTTPS connection. (``parse-check`` imports aiohttp later, outside the window, and still pays it.)

``deferred_store()`` is the window a command's modules are imported in (cli.py): inside it,
``ssl.create_default_context()`` returns a ``DeferredTrust`` context, whose settings are the same and
which loads the system store the first time it wraps a connection, and a context that checks no
certificate skips ``set_default_verify_paths`` (with ``CERT_NONE`` no store is ever consulted). What
a handshake verifies is unchanged. Outside the window nothing is patched; a context made elsewhere, or
aiohttp imported before the window by someone else, is as the ssl module makes it.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import sys
import threading
from collections.abc import Iterator
from typing import Any


class DeferredTrust(ssl.SSLContext):
    """A client context (``PROTOCOL_TLS_CLIENT``: certificates and host names checked) that loads the
    system's trusted certificates when it first wraps a connection."""

    _pending: bool
    _lock: threading.Lock

    def _load_store(self) -> None:
        if self._pending:
            with self._lock:
                if self._pending:
                    ssl.SSLContext.load_default_certs(self, ssl.Purpose.SERVER_AUTH)
                    self._pending = False

    def wrap_socket(self, *args: Any, **kwargs: Any) -> Any:
        self._load_store()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> Any:  # asyncio's and uvloop's TLS transports
        self._load_store()
        return super().wrap_bio(*args, **kwargs)

    def get_ca_certs(self, binary_form: bool = False) -> Any:
        self._load_store()
        return super().get_ca_certs(binary_form)

    def cert_store_stats(self) -> dict[str, int]:
        self._load_store()
        return super().cert_store_stats()


def deferred_context() -> DeferredTrust:
    """What ``ssl.create_default_context()`` makes for a client, with the system store loaded on first use."""
    ctx = DeferredTrust(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname, as the default context
    ctx._pending = True
    ctx._lock = threading.Lock()
    keylog = os.environ.get("SSLKEYLOGFILE")  # as create_default_context: TLS secrets for a debugger, if asked
    if keylog and not sys.flags.ignore_environment:
        ctx.keylog_filename = keylog
    return ctx


@contextlib.contextmanager
def deferred_store() -> Iterator[None]:
    """Import inside this block: the TLS contexts made meanwhile load the system store on first use."""
    create, set_paths = ssl.create_default_context, ssl.SSLContext.set_default_verify_paths
    own = "set_default_verify_paths" in vars(ssl.SSLContext)  # else inherited from _ssl's class: deleted after

    def create_default_context(purpose: ssl.Purpose = ssl.Purpose.SERVER_AUTH, *, cafile: Any = None,
                               capath: Any = None, cadata: Any = None) -> ssl.SSLContext:
        if purpose is not ssl.Purpose.SERVER_AUTH or cafile or capath or cadata:
            return create(purpose, cafile=cafile, capath=capath, cadata=cadata)
        return deferred_context()

    def set_default_verify_paths(self: ssl.SSLContext) -> None:
        if self.verify_mode != ssl.CERT_NONE:
            set_paths(self)

    ssl.create_default_context = create_default_context  # type: ignore[assignment]
    ssl.SSLContext.set_default_verify_paths = set_default_verify_paths  # type: ignore[method-assign]
    try:
        yield
    finally:
        ssl.create_default_context = create
        if own:
            ssl.SSLContext.set_default_verify_paths = set_paths  # type: ignore[method-assign]
        else:
            del ssl.SSLContext.set_default_verify_paths
