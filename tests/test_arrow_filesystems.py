"""crawler/arrow_filesystems.py: a process working on local files loads none of pyarrow's remote filesystems."""

from __future__ import annotations

import json
import subprocess
import sys

# Each case in a fresh interpreter: what a process loads is decided once, at its first pyarrow.fs import.
_WRITE_AND_READ = """
import json, sys
from crawler import arrow_filesystems
hidden = arrow_filesystems.hide()
import pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({"url": ["http://a/"]}), sys.argv[1])
libs = {line.split()[-1].rsplit("/", 1)[-1] for line in open("/proc/self/maps") if "arrow" in line}
print(json.dumps({"hidden": hidden, "again": arrow_filesystems.hide(), "rows": pq.read_table(sys.argv[1]).to_pylist(),
                  "modules": sorted(m for m in arrow_filesystems.REMOTE if m in sys.modules),
                  "s3_library": any(lib.startswith("libarrow_s3") for lib in libs)}))
"""


def _run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_parquet_is_written_and_read_without_the_remote_filesystems(tmp_path):
    seen = _run(_WRITE_AND_READ, str(tmp_path / "t.parquet"))
    assert seen == {"hidden": True, "again": False, "rows": [{"url": "http://a/"}], "modules": [], "s3_library": False}


def test_too_late_once_pyarrow_fs_is_loaded():
    code = ("import json, pyarrow.fs\nfrom crawler import arrow_filesystems\n"
            "print(json.dumps({'hidden': arrow_filesystems.hide(), 'S3': hasattr(pyarrow.fs, 'S3FileSystem')}))")
    assert _run(code) == {"hidden": False, "S3": True}


# What a command's process loads: cli.py hides them for a local crawl_dir, and keeps S3 for an s3:// one.
_COMMAND = """
import json, sys
from crawler import cli
from crawler.config import load_config
cfg = load_config(None, ["crawl_dir=" + sys.argv[1]])
cli._resolve("cycle:cmd_inject", cli.runs_spark(cfg, None), cli.parse_remote(cfg.crawl_dir) is None)
import pyarrow.fs
try:
    pyarrow.fs.S3FileSystem
    s3 = True
except ImportError:  # pyarrow.fs's answer for a filesystem it could not load
    s3 = False
print(json.dumps({"s3": "pyarrow._s3fs" in sys.modules, "S3FileSystem": s3}))
"""


def test_a_command_on_a_local_crawl_dir_loads_no_remote_filesystem(tmp_path):
    assert _run(_COMMAND, str(tmp_path)) == {"s3": False, "S3FileSystem": False}


def test_a_command_on_an_s3_crawl_dir_keeps_s3():
    assert _run(_COMMAND, "s3://bucket/crawl") == {"s3": True, "S3FileSystem": True}
