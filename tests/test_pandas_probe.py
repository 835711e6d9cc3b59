"""pyarrow converts Python objects without importing pandas first (crawler/pandas_probe.py).

Each check runs in a fresh interpreter: the test process has pandas loaded already. The dev extra
installs pandas, so these run where it is installed, as for a user of the spark extra.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("pandas")


def _python(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_after_skip_conversions_leave_pandas_unloaded_and_to_pandas_still_works():
    seen = _python(
        "import json, sys, numpy, pyarrow as pa\n"
        "from crawler import pandas_probe\n"
        "pandas_probe.skip()\n"
        "schema = pa.schema([('url', pa.string()), ('n', pa.int64())])\n"
        "table = pa.table({'url': ['http://h/'], 'n': [1]}, schema=schema)\n"
        "before = 'pandas' in sys.modules\n"
        "frame = table.to_pandas()\n"
        "print(json.dumps({'before': before, 'after': 'pandas' in sys.modules, 'rows': len(frame)}))\n")
    assert seen == {"before": False, "after": True, "rows": 1}


def test_without_skip_pyarrow_imports_pandas_at_its_first_conversion():
    """What skip() saves: the same conversion, unprobed, loads pandas."""
    seen = _python("import json, sys, numpy, pyarrow as pa\npa.array(['http://h/'], pa.string())\n"
                   "print(json.dumps({'pandas': 'pandas' in sys.modules}))\n")
    assert seen == {"pandas": True}


@pytest.mark.parametrize(("command", "loaded"), [
    ("inject seeds.txt", False),
    ("inject seeds.txt -D jobs.engine=spark", True),  # the Spark engine's pandas objects keep pyarrow's probe
    ("fetch segment --spark", True),
])
def test_a_command_probes_unless_it_runs_spark(tmp_path, command, loaded):
    """A command's start (cli.py) makes pyarrow's pandas probe with pandas hidden, unless the command runs
    Spark; then the first typed conversion, as inject's of its seeds, loads pandas or does not."""
    argv = [*command.split(), "-D", f"crawl_dir={tmp_path}"]
    seen = _python(
        "import json, sys, pyarrow as pa\n"
        "from crawler import cli\n"
        f"args = cli.build_parser().parse_args({argv!r})\n"
        "cfg = cli._load(args)\n"
        "cli._resolve(args.handler, cli.runs_spark(cfg, args), cli.parse_remote(cfg.crawl_dir) is None)\n"
        "pa.array(['http://h/'], pa.string())\n"
        "print(json.dumps({'pandas': 'pandas' in sys.modules}))\n")
    assert seen == {"pandas": loaded}
