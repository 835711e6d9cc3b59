"""pyarrow's remote filesystems left unloaded in a process that reads and writes local files only.

``pyarrow.parquet`` imports ``pyarrow.fs``, which loads every filesystem pyarrow was built with: S3's
(``libarrow_s3``, the AWS SDK), Google Cloud Storage's, Azure's and HDFS's, ~6 MB resident in each
process that imports it (measured in docs/benchmarks.md), used only by an ``s3://`` crawl_dir
(crawler/storage/bucket.py). ``hide()`` makes those imports fail before ``pyarrow.fs`` is loaded, which
``pyarrow.fs`` expects (each of them is optional in a pyarrow build): their classes are then missing
from ``pyarrow.fs`` for the life of the process. cli.py calls it for a command whose crawl_dir is local
and that runs no Spark; the part writer (crawler/fetcher/parsepool.py) always, as it writes its parts
into a local folder (a remote crawl_dir's staging copy).
"""

from __future__ import annotations

import sys

REMOTE = frozenset(("pyarrow._s3fs", "pyarrow._gcsfs", "pyarrow._azurefs", "pyarrow._hdfs"))


class _NoRemote:
    """A finder that makes the import of a remote filesystem's module fail."""

    @staticmethod
    def find_spec(name: str, *_: object) -> None:
        if name in REMOTE:
            raise ModuleNotFoundError(f"{name} left unloaded: this process reads and writes local files",
                                      name=name)


def hide() -> bool:
    """Keep the remote filesystems out of this process; False when ``pyarrow.fs`` is loaded already."""
    if "pyarrow.fs" in sys.modules:
        return False
    if _NoRemote not in sys.meta_path:
        sys.meta_path.insert(0, _NoRemote)  # type: ignore[arg-type]
    return True
