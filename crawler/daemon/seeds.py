"""New seed files in ``daemon.seeds``: each is injected once, remembered by name and content hash.

The memory is a small JSON state file under ``crawl_dir``, replaced atomically.
It is written after the inject succeeds: a daemon killed in between injects the
file again on restart, which changes nothing (inject keeps known URLs as they are).
A file whose content changes is injected again; a file that cannot be read is
logged with its name and tried again next cycle.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig
from crawler.errors import CrawlerError
from crawler.fsutil import atomic_write_text
from crawler.jobs.inject import inject, seed_files

STATE_FILE = "daemon-state.json"


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class SeedWatcher:
    def __init__(self, state_path: Path) -> None:
        self.state_path = state_path

    def _load(self, log: Any) -> dict[str, Any]:
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"seeds": {}}
        except (OSError, ValueError) as exc:
            # Forgetting which seeds were injected is harmless: injecting them again changes nothing.
            log.warning("daemon.state_unreadable", file=str(self.state_path), error=str(exc))
            return {"seeds": {}}
        if not isinstance(state, dict) or not isinstance(state.get("seeds"), dict):
            log.warning("daemon.state_unreadable", file=str(self.state_path), error="unexpected content")
            return {"seeds": {}}
        return state

    def has_new(self, cfg: CrawlerConfig, log: Any) -> bool:
        """Whether a seed file is not remembered with its content (or cannot be read: inject_new says why)."""
        folder = Path(cfg.daemon.seeds)
        if not folder.is_dir():
            return False
        seen = self._load(log)["seeds"]
        for path in seed_files(folder):
            try:
                if seen.get(path.name) != file_hash(path):
                    return True
            except OSError:
                return True
        return False

    def inject_new(self, cfg: CrawlerConfig, log: Any) -> list[str]:
        """Inject every seed file not injected before with this content; returns their names."""
        folder = Path(cfg.daemon.seeds)
        if not folder.is_dir():
            return []
        state = self._load(log)
        seen: dict[str, str] = state["seeds"]
        injected = []
        for path in seed_files(folder):
            try:
                digest = file_hash(path)
                if seen.get(path.name) == digest:
                    continue
                report = inject(cfg, path, log)
            except (OSError, CrawlerError) as exc:
                log.error("daemon.seed_failed", file=str(path), error=str(exc))
                continue
            seen[path.name] = digest
            injected.append(path.name)
            log.info("daemon.seeds_injected", file=str(path), injected=report.injected, known=report.known,
                     rejected=report.rejected)
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.state_path, json.dumps(state, indent=1, sort_keys=True))
        return injected
