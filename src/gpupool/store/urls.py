"""Which database URLs the store takes, checked without connecting or writing anything.

The daemon checks `--database-url` with `check_database_url` before it creates its state
directory, so a typo or a missing driver is one line of error and leaves nothing behind.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

EXAMPLES = "sqlite:////var/lib/gpupool/state.db or postgresql://USER@HOST/DATABASE"
# Synchronous drivers only: the store runs plain (not asyncio) sessions.
_DRIVERS = {"sqlite": ("pysqlite",), "postgresql": ("psycopg", "psycopg2", "pg8000")}
POSTGRES_EXTRA = "pip install 'gpupool[postgres]'"


class BadDatabaseUrl(ValueError):
    """A URL the store cannot use; the message says why and what would work, in one line."""


def shown(url: str | URL) -> str:
    """The URL as it may be printed: the password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return str(url)


def check_database_url(text: str) -> URL:
    """The URL, parsed, once its kind is one the store takes and its driver imports.

    Connects to nothing and writes nothing; BadDatabaseUrl otherwise.
    """
    try:
        url = make_url(text)
    except ArgumentError:
        raise BadDatabaseUrl(f"{text!r} is not a database URL (examples: {EXAMPLES})") from None
    backend = url.get_backend_name()  # the name only: nothing is loaded yet
    if backend not in _DRIVERS:
        raise BadDatabaseUrl(
            f"{shown(url)}: gpupool keeps its state in SQLite or PostgreSQL, not {backend!r} "
            f"(examples: {EXAMPLES})"
        )
    try:
        dialect = url.get_dialect()
    except NoSuchModuleError:
        raise BadDatabaseUrl(f"{shown(url)}: SQLAlchemy knows no such driver") from None
    driver = dialect.driver
    if driver not in _DRIVERS[backend]:
        raise BadDatabaseUrl(
            f"{shown(url)}: driver {driver!r} is not supported for {backend} "
            f"(use one of: {', '.join(_DRIVERS[backend])})"
        )
    if backend == "sqlite" and (
        url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"
    ):
        # Every pooled connection would see its own empty database.
        raise BadDatabaseUrl(
            f"{shown(url)}: the store needs a database file, e.g. sqlite:////var/lib/gpupool/state.db"
        )
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        hint = POSTGRES_EXTRA if backend == "postgresql" else f"install {exc.name or driver}"
        raise BadDatabaseUrl(
            f"{shown(url)}: its driver ({driver}) is not installed or does not import: {hint}"
        ) from None
    return url


def sqlite_file(url: URL) -> Path | None:
    """The database file of a SQLite URL; None for other databases."""
    if url.get_backend_name() != "sqlite" or not url.database:
        return None
    return Path(url.database)
