"""Alembic's entry point; run by `gpupool.store.migrations.upgrade` (or Alembic's commands)."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from gpupool.store.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    # Called from Alembic's own commands with a URL (see migrations/__init__.py): use the
    # store's engine setup so SQLite gets the same pragmas and BEGIN handling.
    from gpupool.store.migrations import WRITE_OPTION, make_engine

    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection and no sqlalchemy.url given to the migrations")
    engine = make_engine(url, migrating=True)
    try:
        with engine.execution_options(**{WRITE_OPTION: True}).connect() as conn:
            _configure(conn)
            with conn.begin():  # one transaction for the lot, as in upgrade()
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
