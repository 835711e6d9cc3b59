"""What `crawl`'s own process imports: its start-up is every crawl's fixed cost (docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys

# The parse processes parse pages; the fetch process only hands them over. pyarrow.compute builds the docstrings
# of every compute function as it loads (~40 ms), for nothing the fetch process needs.
NOT_IN_THE_FETCH_PROCESS = ["pyarrow.compute", "lxml", "selectolax"]


def test_the_crawl_command_loads_no_parser_library_and_no_arrow_compute():
    """Importing the crawl command's modules (fetcher, jobs, cycle) leaves those modules unloaded."""
    code = ("import json, sys, crawler.log, crawler.commands.cycle; "
            f"print(json.dumps([m for m in {NOT_IN_THE_FETCH_PROCESS!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []
    assert "crawler.fetcher.known" in subprocess.run(
        [sys.executable, "-c", "import sys, crawler.commands.cycle; print(sorted(sys.modules))"],
        capture_output=True, text=True, check=True).stdout  # the module that used to load pyarrow.compute
