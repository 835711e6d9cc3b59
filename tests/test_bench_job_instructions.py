"""bench/job_instructions.py's passes: every page of a folder through a parse process's job, as the pool hands it over."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

BENCH = ROOT / "bench" / "job_instructions.py"


def test_the_passes_run_every_page_of_the_folder():
    """Without valgrind the same passes run and report each page's CPU: the counted runs' worker works."""
    pages = sorted(p for p in (ROOT / "examples" / "site").rglob("*.htm*") if p.is_file())
    done = subprocess.run([sys.executable, str(BENCH), "--no-valgrind", "--html", str(ROOT / "examples" / "site")],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    reported, cpu = done.stdout.split()[1], float(done.stdout.split()[3])
    assert int(reported) == len(pages) > 5
    assert cpu > 0
