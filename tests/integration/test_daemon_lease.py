"""One database, one scheduling daemon: the lease (store/lease.py) with real daemons sharing a
database (a SQLite file, or a PostgreSQL database) from different state directories."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from integration.backends import Backend, Databases
from integration.pool_harness import Pool, until_file, wait_for


@pytest.fixture
def shared(tmp_path: Path, databases: Databases) -> Iterator[tuple[str, list[Pool]]]:
    """A database shared by daemons; the pools made on it are cleaned up after."""
    if databases.backend is Backend.SQLITE:
        url = f"sqlite:///{tmp_path / 'shared' / 'state.db'}"
    else:
        url = databases.new_url() or ""
    pools: list[Pool] = []
    yield url, pools
    for p in pools:
        if p.proc is not None and p.proc.poll() is None:
            os.kill(p.proc.pid, signal.SIGCONT)
        p.cleanup()


def pool_on(root: Path, url: str, pools: list[Pool], *extra: str) -> Pool:
    p = Pool(root, gpus="1xA100-80GB", args=("--database-url", url, *extra))
    pools.append(p)
    return p


def start_refused(root: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPUPOOL_STATE_DIR=str(root / "state"))
    return subprocess.run(
        [sys.executable, "-m", "gpupool", "server", "--gpus", "1xA100-80GB", "--database-url", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def lease_age(url: str) -> float | None:
    """Seconds since the lease's last heartbeat, or None when no one holds it."""
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            row = conn.exec_driver_sql("SELECT heartbeat_at FROM daemon_lease").first()
    finally:
        engine.dispose()
    return None if row is None else time.time() - row[0]


def _in_a_transaction(conn: sa.Connection) -> bool:
    """Whether another connection (the daemon's) is inside a transaction, holding locks."""
    if conn.dialect.name == "sqlite":
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # SQLite: is the write lock free?
            conn.exec_driver_sql("ROLLBACK")
            return False
        except sa.exc.OperationalError:
            return True
    busy = conn.exec_driver_sql(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND state NOT IN ('idle')"
    ).scalar()
    return bool(busy)


def freeze(pool: Pool, url: str) -> None:
    """SIGSTOP the daemon at a moment it is in no transaction on the database (a stopped
    writer would block every other daemon's writes, which is not what is tested here)."""
    assert pool.proc is not None
    options = {"timeout": 0} if url.startswith("sqlite") else {}
    engine = sa.create_engine(url, poolclass=sa.NullPool, connect_args=options)
    try:
        for _ in range(100):
            os.kill(pool.proc.pid, signal.SIGSTOP)
            with engine.connect() as conn:
                if conn.dialect.name == "sqlite":
                    conn.connection.dbapi_connection.isolation_level = None  # type: ignore[union-attr]
                if not _in_a_transaction(conn):
                    return
            os.kill(pool.proc.pid, signal.SIGCONT)
            time.sleep(0.01)
    finally:
        engine.dispose()
    raise AssertionError("the daemon never left its transactions on the database")


def test_a_second_daemon_on_the_same_database_refuses_to_start(
    tmp_path: Path, shared: tuple[str, list[Pool]]
) -> None:
    url, pools = shared
    first = pool_on(tmp_path / "a", url, pools).start()
    assert first.proc is not None
    proc = start_refused(tmp_path / "b", url)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(
        f"gpupool: the database {url} is in use by the gpupool daemon pid {first.proc.pid} "
        f"on host {socket.gethostname()} (state dir {first.state_dir}), heartbeat "
    ), line
    assert "s ago" in line
    assert not (tmp_path / "b").exists()  # refused before it wrote anything
    # The first daemon is the only one running jobs.
    job = first.submit("--", "true")
    assert first.wait(job).state == "SUCCEEDED"
    # A clean stop gives the lease back: the other daemon starts at once.
    first.stop()
    second = pool_on(tmp_path / "b", url, pools).start()
    assert second.client.job(job).state == "SUCCEEDED"


def test_a_killed_daemon_restarts_at_once_and_its_lease_expires_for_others(
    tmp_path: Path, shared: tuple[str, list[Pool]]
) -> None:
    url, pools = shared
    a = pool_on(tmp_path / "a", url, pools).start()
    a.kill()
    # Its lease (30 s by default) is fresh: another state dir is refused ...
    assert "is in use by the gpupool daemon" in start_refused(tmp_path / "b", url).stderr
    # ... but the same state dir takes it over at once: its flock proves the holder is dead.
    a.start()
    a.kill()
    a.args = (*a.args, "--lease-ttl", "2")
    a.start()
    a.kill()
    wait_for(lambda: (lease_age(url) or 0) > 2.5, what="the lease to expire")
    b = pool_on(tmp_path / "b", url, pools).start()
    assert b.wait(b.submit("--", "true")).state == "SUCCEEDED"


def test_another_daemon_does_not_take_over_while_jobs_run(
    tmp_path: Path, shared: tuple[str, list[Pool]]
) -> None:
    """Its jobs' supervisors live in the other state dir: taking them over would run them
    again. The daemon that started them must come back (it re-adopts them)."""
    url, pools = shared
    a = pool_on(tmp_path / "a", url, pools, "--lease-ttl", "2").start()
    flag = tmp_path / "go"
    job = a.submit("--", *until_file(flag))
    a.wait_state(job, "RUNNING")
    a.kill()
    wait_for(lambda: (lease_age(url) or 0) > 2.5, what="the lease to expire")
    proc = start_refused(tmp_path / "b", url)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "1 job is still RUNNING under it" in line and str(a.state_dir) in line, line
    assert not (tmp_path / "b").exists()  # refused before it wrote anything
    a.start()  # re-adopts its job
    flag.touch()
    assert a.wait(job).state == "SUCCEEDED"


def test_a_daemon_that_lost_its_lease_stops_scheduling(
    tmp_path: Path, shared: tuple[str, list[Pool]]
) -> None:
    url, pools = shared
    a = pool_on(tmp_path / "a", url, pools, "--lease-ttl", "2").start()
    freeze(a, url)  # a frozen daemon stops renewing: as a hung or cut-off machine would
    wait_for(lambda: (lease_age(url) or 0) > 2.5, what="the lease to expire")
    b = pool_on(tmp_path / "b", url, pools).start()
    assert b.proc is not None
    flag = tmp_path / "go"
    job = b.submit("--", *until_file(flag))
    b.wait_state(job, "RUNNING")
    assert a.proc is not None
    os.kill(a.proc.pid, signal.SIGCONT)
    assert a.proc.wait(60) == 1
    log = a.daemon_log()
    assert f"lost the database lease to the gpupool daemon pid {b.proc.pid}" in log, log
    assert "Traceback" not in log
    # It never launched the job the other daemon runs.
    assert not (a.state_dir / "jobs" / str(job)).exists()
    flag.touch()
    assert b.wait(job).state == "SUCCEEDED"
