"""The command-line contract: exit codes, one-line errors, stdout for results only."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import run_crawler


class TestConfigErrors:
    @pytest.mark.parametrize(
        ("override", "needle"),
        [
            ("fetcher.bogus=1", "unknown key fetcher.bogus"),
            ("fetcher.concurrency=many", "fetcher.concurrency = 'many'"),
            ("fetcher.min_delay=soon", "fetcher.min_delay = 'soon': expected a duration"),
        ],
    )
    async def test_bad_override_exits_2_naming_the_key(self, tmp_path, override, needle):
        """A bad -D stops the command before anything runs: exit 2, one line on stderr naming the key."""
        result = await run_crawler("generate", "-D", f"crawl_dir={tmp_path}", "-D", override)
        assert result.code == 2
        assert needle in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert result.stdout == ""
        assert not (tmp_path / "webdb").exists()

    async def test_bad_config_file_exits_2(self, tmp_path):
        """An unknown key in the -c file gives exit 2 and names file and key."""
        config = tmp_path / "c.yaml"
        config.write_text("http:\n  agent: x\n")
        result = await run_crawler("-c", str(config), "readdb", "--stats")
        assert result.code == 2
        assert "unknown key http.agent" in result.stderr and str(config) in result.stderr

    async def test_options_before_and_after_the_subcommand(self, tmp_path):
        """-c/-D are accepted before or after the subcommand."""
        config = tmp_path / "c.yaml"
        config.write_text(f"crawl_dir: {tmp_path}\n")
        result = await run_crawler("-c", str(config), "readdb", "--stats", "-D", "fetcher.concurency=1")
        assert result.code == 2 and "fetcher.concurency" in result.stderr

    async def test_bad_arguments_exit_2(self):
        """An unknown subcommand or a missing argument exits 2 with one line."""
        result = await run_crawler("frobnicate")
        assert result.code == 2
        assert len(result.stderr.strip().splitlines()) == 1


class TestResultsOnStdout:
    async def test_generate_without_db_fails_with_one_line(self, tmp_path):
        """generate before inject is a clear one-line error, exit non-zero, nothing on stdout."""
        result = await run_crawler("generate", "-D", f"crawl_dir={tmp_path}")
        assert result.code == 1
        assert "inject" in result.stderr
        assert result.stdout == ""

    async def test_inject_then_generate_prints_only_the_segment_path(self, tmp_path):
        """Logs go to stderr: generate's stdout is exactly the new segment's path."""
        seeds = tmp_path / "seeds"
        seeds.mkdir()
        (seeds / "a.txt").write_text("http://127.0.0.1:9/\nnot a url\n\n# comment\nhttp://127.0.0.2:9/x\n")
        inject = await run_crawler("inject", str(seeds), "-D", f"crawl_dir={tmp_path}")
        assert inject.code == 0, inject.stderr
        assert inject.stdout == ""
        rejected = [e for e in inject.events() if e["event"] == "inject.rejected"]
        assert len(rejected) == 1 and rejected[0]["line"] == 2 and rejected[0]["file"].endswith("a.txt")
        generate = await run_crawler("generate", "-D", f"crawl_dir={tmp_path}")
        assert generate.code == 0, generate.stderr
        path = generate.stdout.strip()
        assert generate.stdout == path + "\n"
        assert (tmp_path / "segments").resolve() in [p.resolve() for p in __import__("pathlib").Path(path).parents]

    async def test_generate_with_nothing_due_prints_nothing(self, tmp_path):
        """When nothing is due, generate exits 0 with an empty stdout and a log event."""
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("http://127.0.0.1:9/\n")
        await run_crawler("inject", str(seeds), "-D", f"crawl_dir={tmp_path}")
        first = await run_crawler("generate", "-D", f"crawl_dir={tmp_path}")
        assert first.stdout.strip()
        second = await run_crawler("generate", "-D", f"crawl_dir={tmp_path}")
        assert second.code == 0 and second.stdout == ""
        assert any(e["event"] == "generate.empty" for e in second.events())


class TestCheckers:
    async def test_normalize_check_one_line_per_input(self):
        """normalize-check prints exactly one line per input line, '!' plus the reason for rejects."""
        stdin = b"HTTP://Example.COM:80/a/./b/../c#frag\nmailto:someone@example.com\n\n../up\n"
        result = await run_crawler("normalize-check", "--base", "http://example.com/x/y", stdin=stdin)
        assert result.code == 0
        assert result.stdout.splitlines() == [
            "http://example.com/a/c", result.stdout.splitlines()[1], "http://example.com/x/y", "http://example.com/up",
        ]
        assert result.stdout.splitlines()[1].startswith("!")

    async def test_robots_check(self, tmp_path):
        """robots-check prints allowed/denied and the URL, tab-separated, in input order."""
        robots = tmp_path / "robots.txt"
        robots.write_text("User-agent: *\nDisallow: /private/\n\nUser-agent: mybot\nDisallow: /\n")
        urls = tmp_path / "urls.txt"
        urls.write_text("http://a.test/private/x\nhttp://a.test/public\n")
        other = await run_crawler("robots-check", str(robots), str(urls), "--agent", "otherbot")
        assert other.stdout == "denied\thttp://a.test/private/x\nallowed\thttp://a.test/public\n"
        mine = await run_crawler("robots-check", str(robots), str(urls), "--agent", "mybot")
        assert mine.stdout == "denied\thttp://a.test/private/x\ndenied\thttp://a.test/public\n"

    async def test_parse_check_file(self, tmp_path):
        """parse-check --base FILE prints the parser's view as one JSON object."""
        page = tmp_path / "page.html"
        page.write_bytes(b"<html><head><title> Hi </title><meta name=robots content=noindex></head>"
                         b"<body><p>Some   text</p><a href='/b#x'>B</a><a href='mailto:x@y'>m</a></body></html>")
        result = await run_crawler("parse-check", "--base", "http://example.com/a/", str(page))
        assert result.code == 0, result.stderr
        import json

        out = json.loads(result.stdout)
        assert out["title"] == "Hi"
        assert out["outlinks"] == [{"url": "http://example.com/b", "anchor": "B"}]
        assert out["robots"] == {"noindex": True, "nofollow": False}
        assert out["content_type"] == "text/html"
        assert "Some text" in out["text"]


class TestProcessExit:
    """main() as the program freezes the heap before the interpreter's exit; called with arguments it does not."""

    def test_in_process_call_leaves_the_collector_alone(self, tmp_path):
        """main(argv) called from Python (a test, an embedding) does not freeze the caller's heap."""
        import gc

        from crawler.cli import main

        before = gc.get_freeze_count()
        assert main(["readdb", "--stats", "-D", f"crawl_dir={tmp_path}"]) in (0, 1, 2)
        assert gc.get_freeze_count() == before

    async def test_program_exit_still_flushes_and_runs_atexit(self):
        """Run as the program, the output, the exit code and atexit handlers are intact after the heap is frozen."""
        import asyncio
        import sys

        script = ("import atexit, sys\n"
                  "atexit.register(lambda: print('atexit ran', flush=True))\n"
                  "sys.argv = ['crawler', 'normalize-check']\n"
                  "from crawler.cli import main\n"
                  "raise SystemExit(main())\n")
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate(b"HTTP://Example.COM/a/../b\n")
        assert proc.returncode == 0, err
        assert out.decode().splitlines() == ["http://example.com/b", "atexit ran"]


def _after_a_command(then: str, unset: tuple[str, ...], chosen: dict[str, str]) -> str:
    """The last line that ``then`` prints in a fresh interpreter after a command ran there through main()
    (which sets the process's library settings), with ``unset`` gone from the environment and ``chosen`` in it."""
    env = {k: v for k, v in os.environ.items() if k not in unset} | chosen
    script = "import os, sys\nfrom crawler.cli import main\nsys.argv = ['crawler', 'normalize-check']\nmain()\n" + then
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, input="",
                         check=True).stdout
    return out.splitlines()[-1]


class TestArrowAllocator:
    """The command's processes take Arrow's buffers from malloc (trimmed between steps), unless the user chose."""

    @pytest.mark.parametrize(("chosen", "expected"), [(None, "system"), ("mimalloc", "mimalloc")])
    def test_arrow_pool_of_a_command(self, chosen, expected):
        then = "import pyarrow\nprint(pyarrow.default_memory_pool().backend_name)\n"
        mine = {"ARROW_DEFAULT_MEMORY_POOL": chosen} if chosen else {}
        assert _after_a_command(then, ("ARROW_DEFAULT_MEMORY_POOL",), mine) == expected


class TestBlasThreads:
    """numpy (which pyarrow imports) starts no OpenBLAS threads in a command, unless the user asks for them."""

    _THEN = ("import pyarrow\n"
             # OpenBLAS's threads bear the process's name; Arrow's jemalloc starts one of its own name.
             "names = [open(f'/proc/self/task/{t}/comm').read() for t in os.listdir('/proc/self/task')]\n"
             "print(names.count(open('/proc/self/comm').read()), os.environ['OPENBLAS_NUM_THREADS'])\n")

    def _run(self, chosen: str | None) -> tuple[int, str]:
        mine = {"OPENBLAS_NUM_THREADS": chosen} if chosen else {}
        threads, setting = _after_a_command(self._THEN, ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"), mine).split()
        return int(threads), setting

    def test_one_thread_by_default(self):
        assert self._run(None) == (1, "1")

    def test_the_users_setting_wins(self):
        # How many threads OpenBLAS then starts depends on the machine's cores; what it is told does not.
        assert self._run("2")[1] == "2"
