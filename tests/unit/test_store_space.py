"""Telling a full disk from other storage errors (core/space.py), with real errors."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from gpupool.core.space import NEEDED_BYTES, StorageFull, free_bytes, storage_full


def _sqlite_full(tmp_path: Path) -> DBAPIError:
    """SQLite's own SQLITE_FULL, from a database capped at one page, through SQLAlchemy."""
    engine = create_engine(f"sqlite:///{tmp_path / 'capped.db'}")
    with engine.connect() as conn, pytest.raises(DBAPIError) as caught:
        conn.execute(text("PRAGMA max_page_count=1"))
        conn.execute(text("CREATE TABLE t (x TEXT)"))
        conn.execute(text("INSERT INTO t VALUES (:x)"), {"x": "y" * 100_000})
    engine.dispose()
    return caught.value


def test_sqlite_full_is_a_full_disk_with_its_figures(tmp_path: Path) -> None:
    exc = _sqlite_full(tmp_path)
    assert exc.orig.sqlite_errorcode == sqlite3.SQLITE_FULL  # type: ignore[union-attr]
    full = storage_full(exc, tmp_path)
    assert full == StorageFull(str(tmp_path), free_bytes(tmp_path), NEEDED_BYTES)
    assert full.available_bytes is not None and full.available_bytes > 0


def test_a_file_system_out_of_space_is_a_full_disk(tmp_path: Path) -> None:
    for code in (errno.ENOSPC, errno.EDQUOT):
        full = storage_full(OSError(code, "no space"), tmp_path)
        assert full is not None and full.path == str(tmp_path)


def test_postgres_disk_full_names_no_local_path() -> None:
    import psycopg

    exc = psycopg.errors.DiskFull("could not extend file")
    assert storage_full(exc, None) == StorageFull(None, None, NEEDED_BYTES)


def test_other_storage_errors_are_not_a_full_disk(tmp_path: Path) -> None:
    assert storage_full(OSError(errno.EACCES, "denied"), tmp_path) is None
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with engine.connect() as conn, pytest.raises(DBAPIError) as caught:
        conn.execute(text("SELECT * FROM missing"))
    engine.dispose()
    assert storage_full(caught.value, tmp_path) is None
    # An I/O error counts as a full disk only when the disk has less than NEEDED_BYTES free.
    io_error = sqlite3.OperationalError("disk I/O error")
    io_error.sqlite_errorcode = 10 | (3 << 8)  # type: ignore[attr-defined]  # SQLITE_IOERR_WRITE
    assert storage_full(io_error, tmp_path) is None  # this disk has room
