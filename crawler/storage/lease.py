"""The writer lock of a remote store: a lease object created with a conditional PUT and renewed while the job runs.

Object storage has no ``flock``. ``webdb/.lock`` (and ``linkdb/.lock``) is created
with ``If-None-Match: *``, so of two writers exactly one gets it; it holds the
owner and an expiry time, and a thread renews it (``If-Match`` on its ETag) every
third of ``storage.lease_ttl``. A writer that died leaves a lease that expires;
the next one takes it over, again conditionally on the ETag it read, so two
writers racing for an expired lease cannot both win. Expiry compares wall
clocks of different machines: keep them in sync (NTP) and the TTL well above
any skew.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any

from crawler.errors import LeaseHeld, StorageError, WebDbError
from crawler.storage.bucket import Bucket


def owner_id() -> str:
    """Who holds a lease: host and pid, so `crawler` on another machine can say who is writing."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Lease:
    def __init__(self, bucket: Bucket, key: str, ttl: float, log: Any) -> None:
        self.bucket = bucket
        self.key = key
        self.ttl = ttl
        self.log = log
        self.etag: str | None = None
        self.lost = False
        self.taken_over: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def _body(self) -> bytes:
        return json.dumps({"owner": owner_id(), "expires": time.time() + self.ttl}).encode()

    def acquire(self) -> None:
        """Take the lease, or take over an expired one; raise LeaseHeld naming the holder when it is live."""
        etag = self.bucket.put_if_absent(self.key, self._body())
        if etag is None:
            etag = self._take_over()
        self.etag = etag
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease {self.key}", daemon=True)
        self._thread.start()

    def _take_over(self) -> str:
        held = self.bucket.get(self.key)
        if held is None:  # released between our PUT and GET: try once more
            etag = self.bucket.put_if_absent(self.key, self._body())
            if etag is not None:
                return etag
            held = self.bucket.get(self.key)
        holder = _parse(held.data) if held else {}
        expires = float(holder.get("expires", 0))
        if held is not None and expires > time.time():
            until, owner = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)), str(holder.get("owner", "?"))
            raise LeaseHeld(
                f"{self.bucket.url(self.key)}: locked by another job ({owner}, lease until "
                f"{until}); wait for it to finish or for the lease to expire, then run again", owner, until)
        etag = self.bucket.put_if_match(self.key, self._body(), held.etag) if held else None
        if etag is None:
            raise WebDbError(f"{self.bucket.url(self.key)}: another job took the expired lease first; run again later")
        self.taken_over = holder
        self.log.warning("storage.lease_taken_over", lease=self.bucket.url(self.key),
                         previous_owner=holder.get("owner"), expired_s=round(time.time() - expires, 1))
        return etag

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            with self._guard:
                if self.etag is None:
                    return
                try:
                    etag = self.bucket.put_if_match(self.key, self._body(), self.etag)
                except StorageError as exc:
                    # The store is unreachable for now: try again next time, long before the lease runs out.
                    self.log.warning("storage.lease_renew_failed", lease=self.bucket.url(self.key), error=str(exc))
                    continue
                if etag is None:
                    self.lost = True
                    self.log.error("storage.lease_lost", lease=self.bucket.url(self.key))
                    return
                self.etag = etag

    def verify(self) -> None:
        """Before publishing: raise if the lease is no longer ours (we stalled past the TTL and someone took it)."""
        with self._guard:
            if self.lost or self.etag is None or self.bucket.head_etag(self.key) != self.etag:
                self.lost = True
                raise WebDbError(f"{self.bucket.url(self.key)}: our lease was lost (expired and taken over); "
                                 "nothing published, the other writer's versions stand")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._guard:
            if self.etag is not None and not self.lost:
                try:
                    self.bucket.delete_if_match(self.key, self.etag)
                except StorageError as exc:  # the work is published; the lease just expires instead
                    self.log.warning("storage.lease_release_failed", lease=self.bucket.url(self.key), error=str(exc))
            self.etag = None


def _parse(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def require_held(bucket: Bucket, key: str) -> None:
    """For a publish outside the session that leased ``key`` (a crawl round): this process must hold it."""
    blob = bucket.get(key)
    holder = _parse(blob.data) if blob else {}
    if holder.get("owner") != owner_id():
        raise WebDbError(f"{bucket.url(key)}: held by {holder.get('owner') or 'nobody'}, not by this job; "
                         "nothing published")
