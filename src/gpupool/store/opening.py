"""Opening the store for the daemon: without creating a database that does not exist yet, and
with one line of error (StoreUnavailable) when the database cannot be reached or read.

The daemon reads an existing database before it writes anything (projects to check
gpupool.toml against, the lease of another daemon), and creates one only once every check
has passed.
"""

from __future__ import annotations

from sqlalchemy import inspect
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from gpupool.core.space import StorageFull, storage_full
from gpupool.store.migrations import make_engine
from gpupool.store.repository import Store
from gpupool.store.urls import shown, sqlite_file


class StoreUnavailable(RuntimeError):
    """The database could not be opened; the message names it (password hidden) and why.
    `full`: the figures when why is a full disk (the daemon says so in its own words)."""

    def __init__(self, message: str, full: StorageFull | None = None) -> None:
        super().__init__(message)
        self.full = full


def _unavailable(url: URL, exc: BaseException) -> StoreUnavailable:
    path = sqlite_file(url)
    full = storage_full(exc, None if path is None else path.parent)
    return StoreUnavailable(f"cannot open the database {shown(url)}: {_why(exc)}", full)


def _why(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__


def database_exists(url: URL) -> bool:
    """True when `url` holds a gpupool database already (it has Alembic's version table).

    A SQLite file that does not exist is not created; StoreUnavailable when the server
    cannot be reached."""
    path = sqlite_file(url)
    if path is not None and not path.exists():
        return False
    engine = make_engine(url)  # not migrating: its connections change nothing in the file
    try:
        with engine.connect() as conn:
            return inspect(conn).has_table("alembic_version")
    except (SQLAlchemyError, OSError) as exc:
        raise _unavailable(url, exc) from None
    finally:
        engine.dispose()


def open_existing(url: URL) -> Store | None:
    """The Store on `url` if it holds a gpupool database (migrated to head), else None."""
    if not database_exists(url):
        return None
    return open_store(url)


def open_store(url: URL) -> Store:
    """The Store on `url`, the database created if needed and migrated to head."""
    try:
        return Store.open(url.render_as_string(hide_password=False))
    except (SQLAlchemyError, OSError, RuntimeError) as exc:  # RuntimeError: SQLite without WAL
        raise _unavailable(url, exc) from None
