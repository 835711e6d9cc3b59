"""bench/fetch_instructions.py's runs: segments of a served folder fetched by `crawler fetch`, as the counted runs do."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

BENCH = ROOT / "bench" / "fetch_instructions.py"


def test_both_segments_are_fetched_from_the_folder_served():
    """Without valgrind the same fetches run natively: the smaller segment and the one three times its size,
    each fetching the folder's pages from a server of its own (a few of the demo site's URLs are not pages)."""
    site = ROOT / "examples" / "site"
    pages = sorted(p for p in site.rglob("*.htm*") if p.is_file())
    done = subprocess.run([sys.executable, str(BENCH), "--no-valgrind", "--html", str(site)],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    words = done.stdout.split()
    small_urls, small_pages, large_urls, large_pages = int(words[1]), int(words[3]), int(words[8]), int(words[10])
    assert small_urls == len(pages) // 3 and large_urls == 3 * small_urls
    assert 0 < small_pages <= small_urls and small_pages < large_pages <= large_urls
    assert float(words[5]) > 0 and float(words[12]) > 0
