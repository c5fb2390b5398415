"""The databases an integration test's daemon runs on: SQLite (the state directory's file,
the default) and PostgreSQL (the server tests/conftest.py starts), each test on a database
of its own.

On PostgreSQL every database a test asks for is made afresh (CREATE DATABASE) and dropped
when the test ends (DROP DATABASE ... WITH (FORCE): a connection a killed daemon left
behind does not keep it). Which tests run on both is decided in tests/integration/conftest.py.
"""

from __future__ import annotations

import os
import uuid
from enum import Enum

import sqlalchemy as sa
from pg_server import run_outside_a_transaction


class Backend(Enum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


def postgres_server_url() -> str | None:
    """The URL of the test PostgreSQL server's maintenance database, if one runs."""
    return os.environ.get("GPUPOOL_TEST_POSTGRES_URL")


def backends() -> list[Backend]:
    """SQLite always; PostgreSQL when the test server runs (under GPUPOOL_REQUIRE_ALL=1 it
    must: tests/conftest.py refuses to run without it)."""
    return [Backend.SQLITE] + ([Backend.POSTGRESQL] if postgres_server_url() else [])


class Databases:
    """Fresh databases on one backend for one test; `drop_all` when it ends."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._made: list[str] = []

    def new_url(self) -> str | None:
        """The `--database-url` of a fresh, empty database; None on SQLite (the daemon's
        default, `state.db` in its own state directory, is fresh for a fresh directory)."""
        if self.backend is Backend.SQLITE:
            return None
        server = postgres_server_url()
        assert server is not None, "no PostgreSQL test server"
        name = f"gpupool_it_{uuid.uuid4().hex[:16]}"
        run_outside_a_transaction(server, f"CREATE DATABASE {name}")
        self._made.append(name)
        return sa.make_url(server).set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        server = postgres_server_url()
        for name in self._made:
            assert server is not None
            run_outside_a_transaction(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self._made.clear()
