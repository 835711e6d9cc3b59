"""Host queues: per-host limits, complete dispatch, bounded memory. A fake clock keeps them timing-free."""

from __future__ import annotations

import asyncio

import pytest

from crawler.config import FetcherConfig
from crawler.fetcher.hostqueue import FetchQueues


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _take(queues: FetchQueues):
    """A dispatched entry whose request starts at once, as a worker does."""
    item = await queues.ready.get()
    if item is not None:
        queues.start(item[0])
    return item


async def _drain(queues: FetchQueues, hold: int = 0) -> list[tuple[str, object]]:
    """Take every dispatched entry, starting and releasing each at once; record (host, entry) in order."""
    taken = []
    while True:
        item = await _take(queues)
        if item is None:
            return taken
        hq, entry = item
        taken.append((hq.key, entry))
        queues.release(hq)


class TestDispatch:
    async def test_every_entry_is_dispatched_once(self):
        """All queued entries come out exactly once, then the workers get their stop signal."""
        queues = FetchQueues(FetcherConfig(min_delay=0), workers=1)
        for i in range(30):
            await queues.put(f"h{i % 3}", i)
        queues.finish_feeding()
        dispatcher = asyncio.create_task(queues.dispatch())
        taken = await _drain(queues)
        await dispatcher
        assert sorted(e for _, e in taken) == list(range(30))

    async def test_ready_hosts_are_not_held_up_by_a_waiting_one(self):
        """While one host waits for its delay, entries of other hosts are handed out."""
        clock = FakeClock()
        queues = FetchQueues(FetcherConfig(min_delay=100), workers=1, clock=clock)
        await queues.put("slow", "s1")
        await queues.put("slow", "s2")
        for i in range(3):
            await queues.put(f"other{i}", f"o{i}")
        queues.finish_feeding()
        dispatcher = asyncio.create_task(queues.dispatch())
        order = []
        for _ in range(4):
            hq, entry = await _take(queues)
            order.append(entry)
            queues.release(hq)
        assert "s2" not in order  # still waiting for its 100 s delay on the fake clock
        clock.now = 1000.0
        queues._changed.set()  # the fake clock moved: wake the dispatcher as a real timeout would
        hq, entry = await _take(queues)
        assert entry == "s2"
        queues.release(hq)
        assert await queues.ready.get() is None
        await dispatcher

    async def test_per_host_in_flight_limit(self):
        """A host never has more entries out than per_host_concurrency, however many workers are idle."""
        queues = FetchQueues(FetcherConfig(min_delay=0, per_host_concurrency=2), workers=8)
        for i in range(6):
            await queues.put("one", i)
        queues.finish_feeding()
        dispatcher = asyncio.create_task(queues.dispatch())
        held = [await _take(queues) for _ in range(2)]
        await asyncio.sleep(0)
        assert queues.ready.empty()
        assert held[0][0].in_flight == 2
        for hq, _ in held:
            queues.release(hq)
        rest = await _drain(queues)
        await dispatcher
        assert len(rest) == 4


class TestMemory:
    async def test_put_waits_when_the_queue_is_full(self):
        """The reader is held back once max_queued entries wait (backpressure, flat memory)."""
        queues = FetchQueues(FetcherConfig(min_delay=0), workers=1, max_queued=5)
        for i in range(5):
            await queues.put(f"h{i}", i)
        blocked = asyncio.create_task(queues.put("h9", 9))
        await asyncio.sleep(0)
        assert not blocked.done()
        dispatcher = asyncio.create_task(queues.dispatch())
        hq, _ = await _take(queues)
        queues.release(hq)
        await blocked
        queues.finish_feeding()
        await _drain(queues)
        await dispatcher

    async def test_entries_the_fetch_made_do_not_hold_back_the_fetchlist(self):
        """Followed links (and redirect hops) have their own budget: however many of one site's wait, the
        reader still queues the fetchlist's next hosts, and the follow room shrinks with them alone."""
        queues = FetchQueues(FetcherConfig(min_delay=0), workers=1, max_queued=2, max_made=10,
                             made_here=lambda entry: "follow_depth" in entry)
        for i in range(8):
            queues.push("big", {"url": f"http://big/{i}", "follow_depth": 1})
        assert queues.follow_room() == 2
        for i in range(2):
            await asyncio.wait_for(queues.put(f"h{i}", {"url": f"http://h{i}/"}), 1)  # no wait behind "big"
        blocked = asyncio.create_task(queues.put("h9", {"url": "http://h9/"}))
        await asyncio.sleep(0)
        assert not blocked.done()  # two fetchlist entries wait: the reader's own limit
        assert queues.follow_room() == 2
        dispatcher = asyncio.create_task(queues.dispatch())
        taken = []
        while not blocked.done():  # a fetchlist entry goes out: the reader may queue "h9"
            hq, entry = await _take(queues)
            taken.append(entry["url"])
            queues.release(hq)
            await asyncio.sleep(0)
        queues.finish_feeding()
        taken += [entry["url"] for _, entry in await _drain(queues)]
        await dispatcher
        assert sorted(taken) == sorted([*(f"http://big/{i}" for i in range(8)), "http://h0/", "http://h1/",
                                        "http://h9/"])
        assert queues.follow_room() == 10 and queues.made == 0 and queues.queued == 0

    async def test_idle_hosts_are_forgotten(self):
        """Once a host's entries are done and its delay has passed, its queue is dropped."""
        queues = FetchQueues(FetcherConfig(min_delay=0), workers=1)
        for i in range(100):
            await queues.put(f"host{i}", i)
        queues.finish_feeding()
        dispatcher = asyncio.create_task(queues.dispatch())
        await _drain(queues)
        await dispatcher
        assert len(queues.hosts) < 100


class TestBlockingAndDelays:
    async def test_blocked_queue_drops_waiting_and_later_entries(self):
        """block() hands every waiting entry, and every later one for that key, to on_drop with the reason."""
        dropped = []
        queues = FetchQueues(FetcherConfig(min_delay=0), workers=1, on_drop=lambda e, r: dropped.append((e, r)))
        for i in range(3):
            await queues.put("bad", i)
        queues.block(queues.hosts["bad"], "too many failures")
        await queues.put("bad", 3)
        queues.push("bad", 4)
        assert dropped == [(i, "too many failures") for i in range(5)]
        assert queues.queued == 0

    async def test_back_off_and_adaptive_delay(self):
        """back_off moves the host's next start; adapt sets delay from response time, clamped to min/max."""
        clock = FakeClock()
        cfg = FetcherConfig(min_delay=1, delay_factor=3, max_delay=10)
        queues = FetchQueues(cfg, workers=1, clock=clock)
        await queues.put("h", "e")
        hq = queues.hosts["h"]
        queues.back_off(hq, 30)
        assert hq.next_allowed == 30
        queues.adapt(hq, 0.1)
        assert hq.delay == 1
        queues.adapt(hq, 2)
        assert hq.delay == 6
        queues.adapt(hq, 100)
        assert hq.delay == 10

    async def test_reconfigure_applies_new_limits(self):
        """reconfigure() sets min_delay on queues without a Crawl-delay and lets more of one host out at once."""
        queues = FetchQueues(FetcherConfig(min_delay=0), workers=4)
        for i in range(4):
            await queues.put("one", i)
        await queues.put("polite", "p")
        queues.set_crawl_delay(queues.hosts["polite"], 5)
        queues.reconfigure(FetcherConfig(min_delay=2))
        assert (queues.hosts["one"].delay, queues.hosts["polite"].delay) == (2, 5)
        queues.reconfigure(FetcherConfig(min_delay=0, per_host_concurrency=3))
        queues.finish_feeding()
        dispatcher = asyncio.create_task(queues.dispatch())
        held = [await _take(queues) for _ in range(4)]  # "polite" has made no request yet: it may go too
        assert sorted(e for hq, e in held if hq.key == "one") == [0, 1, 2]
        assert queues.hosts["one"].in_flight == 3
        dispatcher.cancel()


class TestFailures:
    @pytest.mark.parametrize(("failures", "next_allowed", "blocked"), [
        (1, 1.0, False),  # max(delay, 0.5) * 2 ** 0, the delay being 1
        (2, 2.0, False),
        (3, 4.0, False),
        (4, 4.0, True),  # max_exceptions_per_queue reached: the rest of the queue is dropped
    ])
    async def test_failures_in_a_row_back_off_then_block(self, failures, next_allowed, blocked):
        """Each failure in a row doubles the back-off (capped by max_delay); the cap'th blocks the queue."""
        dropped = []
        cfg = FetcherConfig(min_delay=1, max_delay=30, max_exceptions_per_queue=4)
        queues = FetchQueues(cfg, workers=1, clock=FakeClock(), on_drop=lambda e, r: dropped.append(r))
        await queues.put("h", "waiting")
        hq = queues.hosts["h"]
        for _ in range(failures):
            queues.failed(hq, "connect")
        assert hq.next_allowed == next_allowed
        assert ("h" in queues.blocked) == blocked
        assert dropped == (["max_exceptions_per_queue (4), last: connect"] if blocked else [])

    async def test_an_answer_ends_the_run_of_failures(self):
        """After an answer the next failure backs off as a first one again."""
        queues = FetchQueues(FetcherConfig(min_delay=1, max_exceptions_per_queue=2), workers=1, clock=FakeClock())
        await queues.put("h", "e")
        hq = queues.hosts["h"]
        queues.failed(hq, "timeout")
        queues.answered(hq, 0.1)
        queues.failed(hq, "timeout")
        assert "h" not in queues.blocked

    @pytest.mark.parametrize(("wait", "next_allowed", "blocked"), [
        (None, 1.0, False),  # no Retry-After: backed off as a failure
        (20.0, 20.0, False),  # held what it asks
        (200.0, 200.0, True),  # more than max_crawl_delay: the rest of the queue is dropped
    ])
    async def test_slow_down_waits_what_retry_after_asks_up_to_the_cap(self, wait, next_allowed, blocked):
        dropped = []
        cfg = FetcherConfig(min_delay=1, max_crawl_delay=60)
        queues = FetchQueues(cfg, workers=1, clock=FakeClock(), on_drop=lambda e, r: dropped.append(r))
        await queues.put("h", "waiting")
        hq = queues.hosts["h"]
        queues.slow_down(hq, "http_429", wait)
        assert hq.next_allowed == next_allowed
        assert dropped == (["retry_after_over_cap"] if blocked else [])
