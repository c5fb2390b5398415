"""The databases bench/daemon_scale.py measures a daemon on: SQLite (a file in the
measurement's state directory, as a daemon makes by default) or PostgreSQL (a fresh database
on a throwaway server, tests/pg_server.py, fsync on as in production; its cluster's CPU time
is read from /proc so that what a daemon costs its database server is measured too)."""

from __future__ import annotations

import os
import shutil
import uuid
from enum import Enum
from pathlib import Path

import sqlalchemy as sa
from tests.pg_server import run_outside_a_transaction


class Backend(Enum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


class Databases:
    """One measurement's databases on one backend: `new` an empty one, `copy` one (for the
    in-process pass, which must not touch the daemon's), `drop_all` when it ends.
    `root`: on SQLite, the directory of `state.db` (a daemon's state directory, where it
    finds it by default), copies beside it; `server_url`: the PostgreSQL server's
    maintenance database (None on SQLite)."""

    def __init__(self, backend: Backend, root: Path, server_url: str | None) -> None:
        if (backend is Backend.POSTGRESQL) != (server_url is not None):
            raise ValueError("a PostgreSQL server URL is needed on PostgreSQL, and only there")
        self.backend, self.root, self.server_url = backend, root, server_url
        self._made: list[str] = []

    def new(self) -> str:
        if self.server_url is None:
            self.root.mkdir(parents=True, exist_ok=True)
            return f"sqlite:///{self.root / 'state.db'}"
        return self._create("")

    def copy(self, url: str) -> str:
        """A copy of the database at `url`, which nothing may have open (a PostgreSQL
        template must have no connections; SQLite's WAL must have been checkpointed, as the
        Store does when it closes)."""
        if self.server_url is None:
            src = Path(sa.make_url(url).database or "")
            (self.root.parent / "copies").mkdir(exist_ok=True)
            dest = self.root.parent / "copies" / f"{uuid.uuid4().hex[:8]}.db"
            shutil.copy(src, dest)
            return f"sqlite:///{dest}"
        return self._create(f" TEMPLATE {sa.make_url(url).database}")

    def drop_all(self) -> None:
        for name in self._made:
            assert self.server_url is not None
            run_outside_a_transaction(
                self.server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )
        self._made.clear()

    def _create(self, template: str) -> str:
        assert self.server_url is not None
        name = f"gpupool_scale_{uuid.uuid4().hex[:16]}"
        run_outside_a_transaction(self.server_url, f"CREATE DATABASE {name}{template}")
        self._made.append(name)
        return sa.make_url(self.server_url).set(database=name).render_as_string(False)


def _cpu_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cluster_cpu_s(data_dir: Path) -> float:
    """CPU seconds used so far by a PostgreSQL cluster: its postmaster (with the children it
    has reaped: cutime, cstime) and every live child (backends, checkpointer, autovacuum...)."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    fields = _cpu_fields(postmaster)
    ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            child = _cpu_fields(int(entry))
        except OSError:  # gone meanwhile
            continue
        if int(child[1]) == postmaster:  # ppid
            ticks += int(child[11]) + int(child[12])
    return ticks / os.sysconf("SC_CLK_TCK")
