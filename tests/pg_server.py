"""A throwaway PostgreSQL server for the store tests, started and stopped by PID.

initdb refuses to run as root, so as root the cluster belongs to the `postgres` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    pass


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise PostgresUnavailable(
            "PostgreSQL is not installed (as root, `make test` installs it with apt-get)"
        )
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self, durable: bool = False) -> None:
        """`durable`: fsync on, as in production (benchmarks); off for the tests' speed."""
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="gpupool-pg-"))
        self.port = _free_port()
        self.data = self.root / "data"
        self.sockdir = self.root / "sock"
        self._as_user: list[str] = []

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self._as_user, *args], capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise PostgresUnavailable(f"{' '.join(args[:2])} failed: {proc.stderr.strip()}")

    def start(self) -> PostgresServer:
        initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
        self.sockdir.mkdir(parents=True)
        if os.geteuid() == 0:
            self._as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.root, "postgres")
            shutil.chown(self.sockdir, "postgres")
        self._run(initdb, "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        opts = (
            f"-p {self.port} -k {self.sockdir} -c listen_addresses=127.0.0.1 "
            f"-c fsync={'on' if self.durable else 'off'} -c max_connections=400"
        )
        self._run(
            pg_ctl, "-D", str(self.data), "-w", "-l", str(self.root / "log"), "-o", opts, "start"
        )
        return self

    def stop(self) -> None:
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().split()[0])
            try:
                os.kill(pid, 15)  # smart shutdown of this server only, by its PID
                for _ in range(100):
                    os.kill(pid, 0)
                    __import__("time").sleep(0.05)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


def run_outside_a_transaction(server_url: str, statement: str) -> None:
    """A statement PostgreSQL will not run inside a transaction (CREATE/DROP DATABASE), on
    the database `server_url` names (the maintenance one, usually)."""
    import sqlalchemy as sa

    engine = sa.create_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def empty_public_schema(url: str) -> None:
    """Drop everything in the database's public schema (tables, types, Alembic's version)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA public CASCADE")
            conn.exec_driver_sql("CREATE SCHEMA public")
    finally:
        engine.dispose()
