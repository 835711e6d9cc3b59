"""What `crawl`'s own process imports: its start-up is every crawl's fixed cost (docs/benchmarks.md)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

# The parse processes parse pages; the fetch process only hands them over. pyarrow.compute builds the docstrings
# of every compute function as it loads (~40 ms), for nothing the fetch process needs.
NOT_IN_THE_FETCH_PROCESS = ["pyarrow.compute", "lxml", "selectolax"]


def _json_of(code: str, *argv: str, stdin: bytes | None = None) -> object:
    """What ``code``, run by a fresh interpreter with ``argv`` (and ``stdin``), prints as JSON."""
    return json.loads(subprocess.run([sys.executable, "-c", code, *argv], input=stdin, capture_output=True,
                                     check=True).stdout)


def test_the_crawl_command_loads_no_parser_library_and_no_arrow_compute():
    """Importing the crawl command's modules (fetcher, jobs, cycle) leaves those modules unloaded."""
    code = ("import json, sys, crawler.log, crawler.commands.cycle; "
            f"print(json.dumps([m for m in {NOT_IN_THE_FETCH_PROCESS!r} if m in sys.modules]))")
    assert _json_of(code) == []
    loaded = _json_of("import json, sys, crawler.commands.cycle; print(json.dumps(sorted(sys.modules)))")
    assert "crawler.fetcher.known" in loaded  # the module that used to load pyarrow.compute


def test_the_parse_pools_processes_load_no_pydantic():
    """The fork server preloads the parse side: it imports neither pydantic nor the config's models (~20 MB
    that the server and every process forked from it would hold). The pool's processes get the config as
    plain values (config.plain), which unpickle without them."""
    code = ("import json, pickle, sys\n"
            "import crawler.fetcher.parsepool, crawler.parsers.html\n"
            "loaded = [m for m in ('pydantic', 'crawler.config') if m in sys.modules]\n"
            "settings = pickle.loads(sys.stdin.buffer.read())\n"
            "parser = crawler.parsers.html.create(settings)\n"
            "print(json.dumps({'loaded': loaded + [m for m in ('pydantic', 'crawler.config') if m in sys.modules],\n"
            "                  'agent': settings.http.effective_user_agent,\n"
            "                  'links': [o.url for o in parser.parse(b\"<a href='/x'>x</a>\", 'http://h/', None).outlinks]}))")
    from crawler.config import load_config, plain

    cfg = load_config(None)
    seen = _json_of(code, stdin=pickle.dumps(plain(cfg)))
    assert seen == {"loaded": [], "agent": cfg.http.effective_user_agent, "links": ["http://h/x"]}


def test_the_memory_module_finds_malloc_trim_without_ctypes_util():
    """crawler.memory (imported by every crawl and by the fork server) takes malloc_trim from the symbols the
    process has loaded: ctypes.util's import and its find_library("c") (ldconfig run in a subprocess) were
    ~15-20 ms of both starts. The trim itself still works where the C library has it."""
    code = ("import ctypes, json, sys, crawler.memory\n"
            "has = hasattr(ctypes.CDLL(None), 'malloc_trim')\n"
            "crawler.memory.trim()\n"
            "print(json.dumps({'util': 'ctypes.util' in sys.modules, 'found': crawler.memory._TRIM is not None, 'has': has}))")
    seen = _json_of(code)
    assert seen["util"] is False
    assert seen["found"] == seen["has"]


def test_the_parse_pools_processes_load_no_event_loop_machinery():
    """The fork server preloads crawler.fetcher.parsepool; its processes run no event loop, and asyncio with
    concurrent.futures was ~3 MB resident in the server and again in each process forked from it. The fetch
    side imports them as it uses them."""
    code = ("import json, sys\n"
            "import crawler.fetcher.parsepool\n"
            "print(json.dumps([m for m in ('asyncio', 'concurrent.futures') if m in sys.modules]))")
    assert _json_of(code) == []


def test_a_heavy_command_loads_pyarrow_before_its_module_and_a_check_never():
    """cli._resolve imports pyarrow (and numpy with it) a few frames deep, before the command's module: from
    inside that module's imports numpy's typing modules cross an edge of CPython 3.11's frame stack, which
    costs a mmap and a munmap per call (docs/benchmarks.md). The checks still load neither."""
    code = ("import json, sys\n"
            "seen = {}\n"
            "def hook(event, args):\n"
            "    if event == 'import' and args[0] in ('numpy', 'pyarrow') and args[0] not in seen:\n"
            "        seen[args[0]] = [m for m in sys.modules if m.startswith('crawler.commands.')]\n"
            "sys.addaudithook(hook)\n"
            "from crawler.cli import _resolve\n"
            "_resolve(sys.argv[1], False, True)\n"
            "print(json.dumps({'seen': seen, 'loaded': [m for m in ('numpy', 'pyarrow') if m in sys.modules]}))")
    # Both loaded while no command module had started loading.
    assert _json_of(code, "cycle:cmd_crawl") == {"seen": {"pyarrow": [], "numpy": []}, "loaded": ["numpy", "pyarrow"]}
    assert _json_of(code, "checks:cmd_normalize_check") == {"seen": {}, "loaded": []}


def test_simhashes_load_no_numpy_ma():
    """updatedb's SimHashes give their nulls as a bitmap: ``pa.array(values, mask=...)`` imported numpy.ma
    (~15 ms of every updatedb) only to test whether the values were a masked array."""
    # As a user's install has it: pandas (a dev extra, which pyarrow imports where present) loads numpy.ma itself.
    code = ("import importlib.abc, json, sys\n"
            "class NoPandas(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name.partition('.')[0] == 'pandas':\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, NoPandas())\n"
            "import pyarrow as pa\n"
            "from crawler.jobs.traps import simhashes\n"
            "hashes = simhashes(pa.array(['one two three', None, '', 'four five']))\n"
            "print(json.dumps({'ma': 'numpy.ma' in sys.modules, 'nulls': hashes.is_null().to_pylist()}))")
    assert _json_of(code) == {"ma": False, "nulls": [False, True, True, False]}
