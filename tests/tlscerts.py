"""A private test CA (trustme) and the server contexts HTTPS tests serve with.

Each server context records the SNI names its clients sent, so a test can tell the crawler asked
for the host name, not the address it reached.
"""

from __future__ import annotations

import datetime
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import trustme


@dataclass
class PrivateCA:
    ca: trustme.CA
    ca_file: Path
    sni: list[str | None] = field(default_factory=list)

    def server(self, *names: str, expired: bool = False) -> ssl.SSLContext:
        """A server context with a certificate for ``names`` signed by this CA (expired a year ago, if asked)."""
        if expired:
            now = datetime.datetime.now(datetime.UTC)
            cert = self.ca.issue_cert(*names, not_before=now - datetime.timedelta(days=730),
                                      not_after=now - datetime.timedelta(days=365))
        else:
            cert = self.ca.issue_cert(*names)
        ctx = self._context()
        cert.configure_cert(ctx)
        return ctx

    def self_signed(self, tmp_path: Path) -> ssl.SSLContext:
        """A server context presenting a self-signed certificate: the CA's own, not in any trust store."""
        other = trustme.CA()
        cert, key = tmp_path / "self-signed.pem", tmp_path / "self-signed.key"
        other.cert_pem.write_to_path(str(cert))
        other.private_key_pem.write_to_path(str(key))
        ctx = self._context()
        ctx.load_cert_chain(str(cert), str(key))
        return ctx

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.sni_callback = lambda _sock, name, _ctx: self.sni.append(name)
        return ctx


def make_ca(tmp_path: Path) -> PrivateCA:
    ca = trustme.CA()
    ca_file = tmp_path / "test-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return PrivateCA(ca, ca_file)
