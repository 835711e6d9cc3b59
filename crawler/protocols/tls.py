"""The TLS side of HTTPS: which certificates are trusted, and a failure told in OpenSSL's words.

- ``http.tls.ca_file`` is trusted besides the system store, not instead of it: a crawl of an intranet
  behind a private CA still fetches the public web.
- ``http.tls.verify: false`` is for archiving what a broken site serves; it is logged as a warning
  when the first client is built, so a crawl that does it is never silent about it.
- A failed check is reported as its own kind (``tls``) with OpenSSL's verify message
  (``self-signed certificate``, ``certificate has expired``, ``unable to get local issuer
  certificate``, ``Hostname mismatch, certificate is not valid for 'x'.``): that names the
  certificate to mend or the CA to trust, where a bare "cannot connect" names nothing.
"""

from __future__ import annotations

import functools
import os
import ssl

import aiohttp
import structlog

from crawler.config import TlsConfig
from crawler.errors import ConfigError
from crawler.protocols.trust import deferred_context

_warned = False


def client_context(cfg: TlsConfig) -> ssl.SSLContext | bool:
    """What the HTTP client's ``ssl`` takes: True for the default checks (aiohttp's own verified context,
    which it builds at its import with the settings ``_context`` would give: loading the system store again
    cost each fetch process ~25 ms), else a context of our own."""
    global _warned
    if not cfg.verify and not _warned:
        _warned = True
        structlog.get_logger("crawler.tls").warning(
            "http.tls.verify_off", detail="certificates and host names are not checked (http.tls.verify is false)")
    if cfg.verify and not cfg.ca_file:
        return True
    try:
        stamp = os.stat(cfg.ca_file).st_mtime_ns if cfg.ca_file else 0
    except OSError:
        stamp = 0  # gone since the config was checked: load_verify_locations says so
    try:
        return _context(cfg.verify, cfg.ca_file, stamp)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"config error: http.tls.ca_file = {cfg.ca_file!r}: cannot be loaded ({exc})") from exc


@functools.lru_cache(maxsize=8)
def _context(verify: bool, ca_file: str, _stamp: int) -> ssl.SSLContext:
    # Built once per process, setting and bundle version (a SIGHUP after the bundle changed loads it
    # again): loading the system store is disk work every protocol instance would repeat.
    if verify:
        ctx = deferred_context()  # the system store at the first handshake (trust.py); the CA file now, checked
        if ca_file:
            ctx.load_verify_locations(cafile=ca_file)
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(("http/1.1",))  # what aiohttp speaks
    return ctx


def describe(exc: BaseException) -> str:
    """OpenSSL's account of a TLS failure, from aiohttp's wrapper or the bare ssl exception."""
    stage = "TLS error"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        exc = exc.certificate_error
    elif isinstance(exc, aiohttp.ClientConnectorError):
        exc, stage = exc.os_error, "handshake failed"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message or exc.reason or exc}"
    if isinstance(exc, ssl.SSLError):
        return f"{stage}: {exc.reason or exc.__class__.__name__}"
    return f"{stage}: {exc}"
