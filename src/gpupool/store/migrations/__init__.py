"""Bringing the database into being: connecting to it (SQLite's settings) and migrating it.

Alembic is configured in code, so there is no alembic.ini to find or to keep in sync. To write
a new revision against a scratch database (autogenerate compares it with models.py):

    from alembic import command
    from gpupool.store.migrations import config
    command.upgrade(config("sqlite:////tmp/scratch.db"), "head")
    command.revision(config("sqlite:////tmp/scratch.db"), "what changed", autogenerate=True)
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.pool import NullPool

SCRIPT_LOCATION = Path(__file__).resolve().parent

# Execution option marking connections that will write; on SQLite they BEGIN IMMEDIATE.
WRITE_OPTION = "gpupool_write"


def open_engine(url: str | URL) -> Engine:
    """The Engine for a database created if needed (directories too) and migrated to head."""
    setup = make_engine(url, migrating=True)
    try:
        with setup.execution_options(**{WRITE_OPTION: True}).connect() as conn:
            upgrade(conn)
    finally:
        setup.dispose()
    return make_engine(url)


def make_engine(url: str | URL, *, migrating: bool = False) -> Engine:
    """An Engine for `url`; SQLite gets its file, pragmas and BEGIN handling here."""
    u = make_url(url)
    pool = NullPool if migrating else None  # a migration's connection must not linger
    if u.get_backend_name() != "sqlite":
        return create_engine(u, pool_pre_ping=True, poolclass=pool)
    db = u.database or ""
    if db in ("", ":memory:") or u.query.get("mode") == "memory":
        # Every pooled connection would see its own empty database.
        raise ValueError(f"the store needs a database file, not {u.render_as_string()!r}")
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(u, poolclass=pool)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take BEGIN away from the sqlite3 module (it would issue a deferred one lazily, and
        # none before SELECT or DDL); _on_begin issues the right kind instead.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=10000")  # first, so the pragmas below wait too
        if migrating:
            # Persistent in the file: set once when the store opens, not on every connection.
            mode = _set_wal(cur)
            if str(mode).lower() != "wal":
                raise RuntimeError(
                    f"{db}: SQLite refused WAL mode (got {mode!r}); is it on a network filesystem?"
                )
        # FULL: the WAL is synced at every commit, so an acknowledged write survives power loss.
        cur.execute("PRAGMA synchronous=FULL")
        # Off while migrating, as SQLite's table-rebuild procedure asks (batch migrations).
        cur.execute(f"PRAGMA foreign_keys={'OFF' if migrating else 'ON'}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock up front: a deferred transaction that reads and then
        # writes can fail with "database is locked" when another writer got in between, and
        # busy_timeout cannot help it. Readers stay deferred so WAL lets them run alongside.
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _set_wal(cur: Any) -> str:
    """Switch the file to WAL. SQLite answers "database is locked" at once, without calling
    the busy handler, while another connection holds a lock for the same switch (two
    processes opening one fresh file): retry for as long as busy_timeout would wait."""
    deadline = time.monotonic() + 10.0
    while True:
        try:
            return str(cur.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def config(url: str | None = None) -> Config:
    cfg = Config()
    # Config values go through ConfigParser interpolation, where "%" is special.
    cfg.set_main_option("script_location", str(SCRIPT_LOCATION).replace("%", "%%"))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(config()).get_current_head()
    assert head is not None, "no migration scripts found"
    return head


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Bring the database behind `connection` to `revision`, all in one transaction.

    Opening the transaction here (rather than letting Alembic do it) makes the version check
    and every migration one atomic unit: on SQLite the connection starts it with BEGIN
    IMMEDIATE, so two processes opening the same fresh file cannot both create the tables.
    """
    cfg = config()
    cfg.attributes["connection"] = connection
    with connection.begin():
        command.upgrade(cfg, revision)
