"""A parse pool's processes are forks of one fork server, started early and ended once they run; the pool reaps them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import forkserver as mp_forkserver
from multiprocessing import resource_tracker
from pathlib import Path

import pytest

from crawler.config import CrawlerConfig
from crawler.fetcher import forkserver
from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.runner import RoundsPool


def _parent(pid: int) -> int:
    # /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after its ')'.
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def _gone(pid: int) -> bool:
    """Exited and reaped: a zombie still has its /proc entry."""
    return not Path(f"/proc/{pid}").exists()


def test_pool_processes_are_forks_of_the_warmed_server_which_ends_once_they_run():
    """The server's work for a pool ends with the forks: it is ended then (it held ~23 MB beside the whole
    fetch), this process adopts the pool's processes, and the pool reaps them when it closes."""
    forkserver.stop()  # a server an earlier test started is not this test's
    assert forkserver.warm_up() is True
    assert forkserver.warm_up() is False  # one server: a second caller neither starts nor owns it
    server = mp_forkserver._forkserver._forkserver_pid
    try:
        with ParsePool(CrawlerConfig(), 1) as pool:
            children = [child.pid for child in pool._children]
            assert len(children) == 1  # the parse process: parts are written by the fetch process
            # Forks of the server (a spawned process would run multiprocessing.spawn), now this process's.
            assert all("multiprocessing.forkserver" in _cmdline(pid) for pid in children)
            assert {_parent(pid) for pid in children} == {os.getpid()}
            assert _gone(server) and mp_forkserver._forkserver._forkserver_pid is None
            assert asyncio.run(pool.parse(b"<p>one</p>", "http://h/", "text/html"))[0]["text"] == "one"
    finally:
        forkserver.stop()
    assert all(_gone(pid) for pid in children)  # reaped by the pool, not left zombies
    assert forkserver.warm_up() is True  # a later command starts a new one
    forkserver.stop()


def test_where_no_process_can_adopt_them_the_server_stays_and_stop_reaps_it(monkeypatch):
    """Without a child subreaper (not Linux), the pool's processes stay the server's children, and the
    server runs until ``stop``, as before."""
    monkeypatch.setattr(forkserver, "_subreaper", lambda on: False)
    forkserver.stop()
    assert forkserver.warm_up() is True
    server = mp_forkserver._forkserver._forkserver_pid
    try:
        with ParsePool(CrawlerConfig(), 1) as pool:
            children = [child.pid for child in pool._children]
            assert {_parent(pid) for pid in children} == {server}
            assert asyncio.run(pool.parse(b"<p>one</p>", "http://h/", "text/html"))[0]["text"] == "one"
    finally:
        forkserver.stop()
    assert _gone(server) and all(_gone(pid) for pid in children)


def test_an_adopted_process_that_died_is_reaped_and_the_other_still_parses():
    forkserver.stop()
    with ParsePool(CrawlerConfig(), 2) as pool:
        first, second = (child.pid for child in pool._children)
        os.kill(first, signal.SIGKILL)
        while Path(f"/proc/{first}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            pass  # dead, a zombie of this process until the pool reaps it
        for _ in range(3):  # whichever process the pool picks first, it learns the dead one is gone
            with contextlib.suppress(BrokenProcessPool):
                asyncio.run(pool.parse(b"<p>x</p>", "http://h/", "text/html"))
        assert asyncio.run(pool.parse(b"<p>two</p>", "http://h/", "text/html"))[0]["text"] == "two"
    assert _gone(first) and _gone(second)


def test_a_pool_without_warm_up_still_starts():
    """A caller that did not warm the server up (a library user) gets one on the pool's first start."""
    forkserver.stop()
    with ParsePool(CrawlerConfig(), 1) as pool:
        assert all(child.pid and child.pid != os.getpid() for child in pool._children)


def test_a_server_stopped_while_still_importing_is_reaped():
    """A command that fails right after warming the server up does not wait for the server's imports."""
    forkserver.stop()
    assert forkserver.warm_up() is True
    server = mp_forkserver._forkserver._forkserver_pid
    forkserver.stop()
    assert not Path(f"/proc/{server}").exists()
    assert mp_forkserver._forkserver._forkserver_pid is None  # and a later start makes a new one


def test_crawls_pool_ends_between_fetches_with_its_server_and_no_tracker_runs_beside_a_pool(tmp_path):
    """``RoundsPool.release`` (crawl, after each fetch): while updatedb runs, neither the pool's processes nor
    the fork server are left (their memory would sit beside the jobs' peak); the next fetch's pool is forks
    of a new server, which the command's exit stops in turn. multiprocessing's resource tracker, which the
    server starts, is ended as soon as a pool's processes are forked: nothing of a pool needs it."""
    forkserver.stop()
    cfg = CrawlerConfig(crawl_dir=str(tmp_path), fetcher={"parse_processes": 1})
    tracker = resource_tracker._resource_tracker
    with RoundsPool(cfg) as pools:
        server = mp_forkserver._forkserver._forkserver_pid
        pool = pools.start("s1")
        first = [child.pid for child in pool._children]
        assert _gone(server)  # ended once the pool's processes were forked (test above)
        assert tracker._pid is None and tracker._fd is None
        assert asyncio.run(pool.parse(b"<p>one</p>", "http://h/", "text/html"))[0]["text"] == "one"
        pools.release()
        assert pools.pool is None
        assert all(_gone(pid) for pid in [*first, server])  # exited and reaped
        pool = pools.start("s2")
        second = [child.pid for child in pool._children]
        # Forks of a new server, which ended in turn: the first had gone with the first pool's start.
        assert all("multiprocessing.forkserver" in _cmdline(pid) for pid in second)
        assert mp_forkserver._forkserver._forkserver_pid is None
        assert tracker._pid is None
        assert asyncio.run(pool.parse(b"<p>two</p>", "http://h/", "text/html"))[0]["text"] == "two"
    assert all(_gone(pid) for pid in second)


@pytest.mark.parametrize("start", ["warm", "pool", "restart"])
def test_the_server_never_imports_a_crawler_package_from_the_working_directory(tmp_path, start):
    """The server is a `python -c`, whose sys.path starts with the working directory: a `crawler` package
    there (another version's checkout) must not be what the pool's processes run, whether the command
    warmed the server up, the pool starts it, or multiprocessing restarts it as a process starts (the
    server died after the pool's ensure_running: here, ensure_running does nothing and the server is killed)."""
    decoy = tmp_path / "crawler"
    decoy.mkdir()
    (decoy / "__init__.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('imported').write_text('yes')\n")
    code = ("import sys\nsys.path.remove('')  # this process imports the real package\n"
            "from crawler.fetcher import forkserver\n"
            "from crawler.config import CrawlerConfig\n"
            "from crawler.fetcher.parsepool import ParsePool\n"
            "import os, signal\n"
            "from multiprocessing import forkserver as mp_forkserver\n"
            "if __name__ == '__main__':\n"
            f"    {'pass' if start == 'pool' else 'forkserver.warm_up()'}\n"
            f"    if {start == 'restart'}:\n"
            "        os.kill(mp_forkserver._forkserver._forkserver_pid, signal.SIGKILL)\n"
            "        stat = f'/proc/{mp_forkserver._forkserver._forkserver_pid}/stat'\n"
            "        while open(stat).read().rpartition(')')[2].split()[0] != 'Z':  # dead, not reaped\n"
            "            pass\n"
            "        forkserver.ensure_running = lambda: None\n"
            "    with ParsePool(CrawlerConfig(), 1) as pool:\n"
            "        pass\n"
            "    forkserver.stop()\n"
            "    print('done')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr[-2000:]
    assert not (decoy / "imported").exists()
