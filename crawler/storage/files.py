"""Single files directly under a remote crawl_dir (the daemon's seed state): pulled whole, published when changed."""

from __future__ import annotations

from pathlib import Path

from crawler.fsutil import atomic_write_bytes
from crawler.storage.bucket import Bucket
from crawler.storage.stores import STATE_DIR, read_state, write_state


def _stamp(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns]


class FileSync:
    def __init__(self, bucket: Bucket, crawl_path: Path) -> None:
        self.bucket = bucket
        self.crawl_path = crawl_path
        self.state_path = crawl_path / STATE_DIR / "files.json"

    def pull(self, names: tuple[str, ...]) -> None:
        """Replace the staging copies of ``names``; from now on only they are published (by this command)."""
        state: dict[str, list[int] | None] = {}
        for name in names:
            local = self.crawl_path / name
            blob = self.bucket.get(self.bucket.remote.key(name))
            if blob is None:
                local.unlink(missing_ok=True)  # the bucket is the truth: a staging leftover is not
            else:
                atomic_write_bytes(local, blob.data)
            state[name] = _stamp(local)
        write_state(self.state_path, state)

    def publish(self) -> list[str]:
        """Upload the files the running command pulled that changed since; their names."""
        state = read_state(self.state_path)
        changed = [n for n in state if _stamp(self.crawl_path / n) not in (None, state[n])]
        self.bucket.upload([(self.crawl_path / n, self.bucket.remote.key(n)) for n in changed])
        for name in changed:
            state[name] = _stamp(self.crawl_path / name)
        write_state(self.state_path, state)
        return changed
