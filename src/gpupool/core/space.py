"""A full disk under the store, told apart from other storage errors, with its figures.

A write refused for lack of space changes nothing (SQLite and PostgreSQL roll the
transaction back), so the API can answer it plainly (HTTP 507) instead of with a 500.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

# The free space a write of the pool needs, at most: a submission or a cancel is a few
# SQLite pages, written twice (WAL, then checkpoint), plus room for the jobs' control files.
# Below this the disk counts as full.
NEEDED_BYTES = 1 << 20
_PG_DISK_FULL = "53100"  # SQLSTATE disk_full
_SQLITE_IOERR = 10  # primary result code: an fsync or write failed (ENOSPC may show so)


@dataclass(frozen=True)
class StorageFull:
    """The disk holding the pool's data is full."""

    path: str | None  # the directory on that disk; None: a database server's own disk
    available_bytes: int | None  # free for the pool's user; None where it cannot be seen
    needed_bytes: int = NEEDED_BYTES


def free_bytes(path: Path) -> int | None:
    """Free space for an unprivileged writer on the file system of ``path``."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def storage_full(exc: BaseException, data_dir: Path | None) -> StorageFull | None:
    """The figures if ``exc`` means the disk under ``data_dir`` (the SQLite file's
    directory, or the state directory; None for a database server) is full, else None."""
    orig = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's exception
    if getattr(orig, "sqlstate", None) == _PG_DISK_FULL or getattr(orig, "pgcode", None) == (
        _PG_DISK_FULL
    ):
        return StorageFull(None, None)
    if data_dir is None:
        return None
    available = free_bytes(data_dir)
    low = available is not None and available < NEEDED_BYTES
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        io_error = code is not None and code & 0xFF == _SQLITE_IOERR
        if code == sqlite3.SQLITE_FULL or (io_error and low):
            return StorageFull(str(data_dir), available)
        return None
    if isinstance(orig, OSError) and orig.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageFull(str(data_dir), available)
    return None
