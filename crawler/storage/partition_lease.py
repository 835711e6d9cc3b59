"""The fetch lease of a segment partition in the bucket: one machine at a time fetches and publishes it.

Two machines running ``fetch SEG --partition I`` for the same ``I`` would both
fetch, and both upload (the parts of the one publishing last winning file by
file). So a fetch of a remote segment first leases each partition it is about
to fetch, ``segments/.leases/SEG/partition-IIIII``, with the stores' lease
(crawler/storage/lease.py: created with ``If-None-Match``, renewed by a thread,
taken over with ``If-Match`` once expired). The leases live beside the segments,
not inside one, so pulling or publishing a segment never carries them.

Partitions whose ``_done`` marker is already in the bucket are not leased, so
not fetched again. The done set is read again once the leases are held: a
holder that finished and released between our listing and our lease has
published its marker first, and its partition is dropped from ours.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from crawler.errors import SegmentError
from crawler.storage.bucket import Bucket
from crawler.storage.lease import Lease, LeaseHeld
from crawler.storage.segments import LEASES, SegmentSync


def partition_lease_key(bucket: Bucket, segment: str, partition: int) -> str:
    return bucket.remote.key("segments", LEASES, segment, f"partition-{partition:05d}")


class PartitionLeases:
    """Leases on the partitions of one segment that this process fetches, held until they are published."""

    def __init__(self, sync: SegmentSync, segment: str, ttl: float, log: Any) -> None:
        self.sync = sync
        self.bucket = sync.bucket
        self.segment = segment
        self.ttl = ttl
        self.log = log
        self.held: dict[int, Lease] = {}
        self.done: list[int] = []  # wanted, but already done in the bucket
        self.done_in_bucket: set[int] = set()  # every partition done there, wanted or not

    def acquire(self, wanted: Collection[int] | None) -> list[int]:
        """Lease the wanted partitions (None: all) not yet done in the bucket; those leased, to be fetched.

        Raises SegmentError naming the segment, the partition and its holder if one is leased by another
        process; then no lease is kept.
        """
        partitions, done = self.sync.fetch_partitions(self.segment)
        if not partitions:
            raise SegmentError(f"{self.bucket.url(self.sync.key(self.segment))}: no such segment in the bucket "
                               "(no fetchlist parts)")
        chosen = [p for p in partitions if wanted is None or p in wanted]
        try:
            for partition in (p for p in chosen if p not in done):
                lease = Lease(self.bucket, partition_lease_key(self.bucket, self.segment, partition), self.ttl, self.log)
                try:
                    lease.acquire()
                except LeaseHeld as exc:
                    raise SegmentError(
                        f"segment {self.segment}, partition {partition}: being fetched by {exc.owner} (lease "
                        f"{self.bucket.url(lease.key)} until {exc.until}); fetch other partitions, or run again "
                        "once it is done or its lease has expired") from None
                self.held[partition] = lease
            if self.held:
                _, done = self.sync.fetch_partitions(self.segment)
                for partition in [p for p in self.held if p in done]:
                    self.held.pop(partition).release()
        except BaseException:
            self.release()
            raise
        self.done = [p for p in chosen if p not in self.held]
        self.done_in_bucket = done
        for partition, lease in self.held.items():
            if lease.taken_over is not None:
                self.log.warning("storage.partition_taken_over", segment=self.segment, partition=partition,
                                 previous_owner=lease.taken_over.get("owner"))
        return sorted(self.held)

    def unheld(self, partitions: Collection[int]) -> set[int]:
        """Those of ``partitions`` no process holds a lease on (one that is publishing still does)."""
        return {p for p in partitions
                if self.bucket.head_etag(partition_lease_key(self.bucket, self.segment, p)) is None}

    def verify(self) -> None:
        """Before publishing: raise if another process took over one of our partitions (we stalled past the TTL)."""
        for lease in self.held.values():
            lease.verify()

    def release(self) -> None:
        for lease in self.held.values():
            lease.release()
        self.held.clear()

