"""A staging tree whose Parquet parts stay in the bucket: each local part is a reference naming its object.

Spark jobs over an ``s3://`` crawl_dir run on executors that cannot see the
driver's disk, so the driver must not pull the data at all. For those commands
the session pulls into a second staging tree, the *reference tree*, beside the
ordinary staging copy: metadata (``CURRENT``, ``meta.json``, markers) arrives
as usual, but every ``*.parquet`` object becomes a small file naming its key.
The jobs glob, count, hard-link and rename those files exactly as they would
real parts, so their code does not change; the Spark engine hands the keys to
the executors, which read and write the bucket themselves (crawler.storage.bucket_io).

A part an executor writes goes to this process's *scratch* prefix first: its
final name is known only once every partition has finished, and a job that
fails must leave nothing under ``webdb/`` or ``segments/``. Publishing a
reference whose key is not its own place is a server-side copy (S3 has no
rename), in the session's usual publish order, so markers and ``CURRENT``
still come last. The tree is separate from the ordinary staging copy so that a
command reading real files (fetch, readdb...) never meets a reference, even
when both run at once on one machine.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from crawler.crawldir import Remote, default_staging_dir
from crawler.fsutil import TEMP_PREFIX, atomic_write_bytes

MAGIC = b"crawler-bucket-reference 1\n"
TREE = "by-reference"  # below storage.staging_dir; beside the ordinary copies' scheme folders (s3/)
TREE_MARKER = ".storage/by-reference"  # in the tree's crawl folder: the engine writes to the bucket here
SCRATCH = f"{TEMP_PREFIX}spark"  # below crawl_dir in the bucket: parts written by executors, not yet placed


def is_part(key: str) -> bool:
    """Whether an object is data the executors read (a reference in the tree), not metadata the driver reads."""
    return key.endswith(".parquet")


def write_reference(path: Path, key: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, MAGIC + key.encode() + b"\n")


def read_reference(path: Path | str) -> str | None:
    """The object key a reference names; None for any other file (a real part, a marker)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC) + 4096)
    except OSError:
        return None
    if not head.startswith(MAGIC):
        return None
    return head[len(MAGIC):].decode(errors="replace").strip()


def tree_staging_dir(staging_dir: str) -> str:
    """The ``storage.staging_dir`` under which a remote crawl_dir's reference tree lies."""
    root = Path(staging_dir) if staging_dir else default_staging_dir()
    return str(root / TREE)


def is_reference_tree(crawl_path: Path) -> bool:
    return (crawl_path / TREE_MARKER).is_file()


def mark_reference_tree(crawl_path: Path) -> None:
    (crawl_path / TREE_MARKER).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(crawl_path / TREE_MARKER, b"")


def scratch_prefix(remote: Remote) -> str:
    """This process's scratch prefix in the bucket (host and pid: two drivers never share one)."""
    return remote.key(SCRATCH, f"{socket.gethostname()}-{os.getpid()}")
