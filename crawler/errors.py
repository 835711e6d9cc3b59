"""The crawler's exceptions, one tree.

::

    CrawlerError
    ├── ConfigError          bad config file, key, value or -D override (exit 2)
    ├── UsageError           bad command-line arguments (exit 2)
    ├── PluginError
    │   └── PluginNotFound   no plugin registered under that name / scheme / type
    ├── InvalidUrl           a URL the normalizer rejects (also a ValueError); callers record or skip it
    ├── FetchError(url)      raised inside protocols only; the worker turns it into a status
    │   ├── DnsError
    │   ├── ConnectError
    │   ├── TlsError         TLS handshake or certificate verification failed
    │   ├── ProxyError       the proxy could not be reached or refused the tunnel
    │   ├── FetchTimeout     (also a TimeoutError)
    │   ├── BlockedAddress   private / loopback / link-local address refused
    │   └── ProtocolViolation
    └── StorageError
        ├── WebDbError       webdb missing, locked or unreadable
        ├── SegmentError     segment missing or a part unreadable (names the file)
        └── LeaseHeld        a remote store's lease (writer lock, crawl.lock, a fetch partition) is another job's

Per-URL outcomes are data (a fetch status), never exceptions; these are for the
boundaries and for infrastructure failures.
"""

from __future__ import annotations


class CrawlerError(Exception):
    """Base of every error the crawler raises on purpose."""

    exit_code = 1


class ConfigError(CrawlerError):
    exit_code = 2


class UsageError(CrawlerError):
    exit_code = 2


class PluginError(CrawlerError):
    pass


class PluginNotFound(PluginError, LookupError):
    pass


class InvalidUrl(CrawlerError, ValueError):
    """str(exc) is a short human reason, e.g. 'unsupported scheme ftp', 'no host', 'invalid port'.

    A ValueError too: code that skips any unusable href catches ValueError (``urls/normalize.py``).
    """


class FetchError(CrawlerError):
    """A failure to fetch one URL; ``kind`` is the label used in logs, metrics and segment records."""

    kind = "error"

    def __init__(self, message: str, url: str = "") -> None:
        super().__init__(message)
        self.url = url

    @property
    def summary(self) -> str:
        """The kind, plus the detail a user needs when the kind alone does not say what to mend."""
        return self.kind


class DnsError(FetchError):
    kind = "dns"


class ConnectError(FetchError):
    kind = "connect"


class TlsError(FetchError):
    """The message is OpenSSL's own words (``self-signed certificate``, ``certificate has expired``...):
    they are what a user searches for, and what names the certificate to mend or to trust."""

    kind = "tls"

    @property
    def summary(self) -> str:
        return f"{self.kind}: {self}"


class ProxyError(FetchError):
    kind = "proxy"


class FetchTimeout(FetchError, TimeoutError):
    kind = "timeout"


class BlockedAddress(FetchError):
    kind = "blocked_address"


class ProtocolViolation(FetchError):
    kind = "protocol"


class StorageError(CrawlerError):
    pass


class WebDbError(StorageError):
    pass


class SegmentError(StorageError):
    pass


class LeaseHeld(StorageError):
    """The lease is live and someone else's: who holds it, and until when (UTC, ISO 8601).

    Not a WebDbError: the same lease guards a segment's fetch partitions (``storage/partition_lease.py``).
    """

    def __init__(self, message: str, owner: str, until: str) -> None:
        super().__init__(message)
        self.owner = owner
        self.until = until
