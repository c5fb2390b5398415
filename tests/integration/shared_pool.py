"""One daemon shared by the tests of a module, per database backend, for tests that do not
depend on each other's jobs (issue 38: the suite's time).

Starting a daemon is most of a short integration test's time (its imports alone are 1-2 s
of CPU, and a PostgreSQL database is made for it): a module whose tests each submit their own
jobs and look only at those can run them on one daemon per backend. A test that asserts on
every job the pool holds, or that kills or restarts the daemon, keeps a pool of its own
(conftest's `pool`).

A module takes the fixtures by importing `module_pool_fixture` (`module_pool`, one daemon
per backend) or `module_pool_on_sqlite_fixture` (`module_pool_on_sqlite`).

Between tests the shared daemon is brought back to idle (`end_active_jobs`): whatever a test
left pending or running, a failed one's jobs included, is cancelled and has ended before the
next test starts, so every test finds all the pool's GPUs free, as on a fresh daemon.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpupool.client import ApiError
from integration.backends import Backend, Databases, backends
from integration.pool_harness import Pool


def shared_pool_on(root: Path, backend: Backend) -> Iterator[Pool]:
    """A started daemon on a fresh database of `backend`; stopped and dropped after."""
    databases = Databases(backend)
    try:
        started = Pool(root, database_url=databases.new_url()).start()
        try:
            yield started
        finally:
            started.cleanup()
    finally:
        databases.drop_all()


@pytest.fixture(
    scope="module", params=backends(), ids=lambda backend: backend.value, name="module_pool"
)
def module_pool_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pool]:
    """One daemon for the whole module, on each backend in turn (as conftest's `pool`)."""
    backend: Backend = request.param
    yield from shared_pool_on(tmp_path_factory.mktemp(f"pool-{backend.value}"), backend)


@pytest.fixture(scope="module", name="module_pool_on_sqlite")
def module_pool_on_sqlite_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    """One daemon for a module whose tests the database cannot change (backend_independent:
    SQLite only, the rule in conftest.py)."""
    yield from shared_pool_on(tmp_path_factory.mktemp("pool-sqlite"), Backend.SQLITE)


def end_active_jobs(pool: Pool, timeout: float = 120) -> None:
    """Cancel every job still pending or running and wait until each has ended: the pool is
    idle again, with every GPU free."""
    active = pool.client.jobs()
    for job in active:
        try:
            pool.client.cancel(job.id)
        except ApiError:
            pass  # it ended on its own in between: the wait below sees it
    for job in active:
        pool.wait(job.id, timeout=timeout)


def job_ids(pool: Pool) -> set[int]:
    """The ids of every job the pool holds, ended or not."""
    return {job.id for job in pool.client.jobs(include_finished=True)}
