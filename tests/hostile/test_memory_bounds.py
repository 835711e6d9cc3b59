"""Per-host state a fetch keeps for dead hosts is bounded, however many hosts the fetchlist names."""

from __future__ import annotations

from crawler.config import FetcherConfig
from crawler.fetcher.hostqueue import MAX_BLOCKED, FetchQueues, HostQueue


async def test_blocked_hosts_are_remembered_up_to_a_bound():
    """Past MAX_BLOCKED blocked hosts the oldest is forgotten (its next entry is queued again, to be tried
    and recorded), while a recently blocked host's entries are still dropped with their reason."""
    dropped: list[tuple[str, str]] = []
    queues = FetchQueues(FetcherConfig(min_delay=0), 1, on_drop=lambda entry, why: dropped.append((entry, why)))
    for i in range(MAX_BLOCKED + 10):
        queues.block(HostQueue(f"h{i}", 0.0), "robots.txt unreachable: connect")
    assert len(queues.blocked) == MAX_BLOCKED
    queues.push(f"h{MAX_BLOCKED + 9}", "recent")
    queues.push("h0", "forgotten")
    assert dropped == [("recent", "robots.txt unreachable: connect")]
    assert queues.queued == 1
