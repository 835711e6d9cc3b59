"""Logs: JSON lines on stderr when it is not a terminal, also in log.file; stdout untouched."""

from __future__ import annotations

import json

from tests.conftest import run_crawler


class TestLogOutput:
    async def test_json_lines_on_stderr_and_in_log_file(self, tmp_path):
        """Every stderr line is one JSON object with timestamp, level and event; log.file gets the same events."""
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("http://127.0.0.1:9/\nhttp://[bad\n")
        log_file = tmp_path / "crawler.log"
        result = await run_crawler("inject", str(seeds), "-D", f"crawl_dir={tmp_path}", "-D", f"log.file={log_file}")
        assert result.code == 0, result.stderr
        assert result.stdout == ""
        events = [json.loads(line) for line in result.stderr.splitlines()]
        assert events and all({"timestamp", "level", "event"} <= set(e) for e in events)
        assert events[0]["timestamp"].endswith("Z")
        in_file = [json.loads(line) for line in log_file.read_text().splitlines()]
        assert [e["event"] for e in in_file] == [e["event"] for e in events]
        assert any(e["event"] == "inject.rejected" and e["line"] == 2 for e in in_file)

    async def test_level_filters_events(self, tmp_path):
        """log.level=error hides the info and warning events."""
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("http://127.0.0.1:9/\nnot a url\n")
        result = await run_crawler("inject", str(seeds), "-D", f"crawl_dir={tmp_path}", "-D", "log.level=error")
        assert result.code == 0
        assert result.stderr == ""
