"""One daemon per backend shared by a module's tests, in modules that mix tests on both
databases with `backend_independent` ones, and whose tests may make projects (issue 38: the
suite's time; the idea of integration/shared_pool.py, which this builds on).

A module takes it by importing `pytest_generate_tests`, `shared_daemon_fixture` and
`pool_fixture` (its `pool`, which then replaces conftest's): a test runs once per backend on
that backend's module daemon, or on SQLite's only when marked backend_independent (the rule
in conftest.py), so such a module starts at most one daemon per backend instead of one per
test and backend. `own_pool_fixture` (`own_pool`) is conftest's `pool` under another name,
for the tests that must have a daemon of their own: they assert on every job or project the
pool holds, or stop the daemon.

After each test the shared daemon is as a fresh one would be for the next: every job still
pending or running has been cancelled and has ended (shared_pool.end_active_jobs), and every
project the test made is deleted, with the users' defaults that pointed at it. What a test
may not leave behind, and this does not undo, is anything else pool-wide (departments,
tokens, server flags): such a test takes `own_pool`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.backends import Backend, Databases, backends
from integration.conftest import BACKEND_INDEPENDENT
from integration.pool_harness import Pool
from integration.shared_pool import end_active_jobs, shared_pool_on

SHARED_DAEMON = "shared_daemon"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test on the shared daemon runs on each backend's, or on SQLite's only when marked
    backend_independent. The parameter is module-scoped: pytest groups a module's tests by
    backend and starts each backend's daemon once."""
    if SHARED_DAEMON not in metafunc.fixturenames:
        return
    independent = metafunc.definition.get_closest_marker(BACKEND_INDEPENDENT) is not None
    params = [Backend.SQLITE] if independent else backends()
    metafunc.parametrize(
        SHARED_DAEMON, params, indirect=True, scope="module", ids=[b.value for b in params]
    )


@pytest.fixture(scope="module", name=SHARED_DAEMON)
def shared_daemon_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pool]:
    """The module's daemon on the backend of the test's parameter."""
    backend: Backend = request.param
    yield from shared_pool_on(tmp_path_factory.mktemp(f"pool-{backend.value}"), backend)


def project_names(pool: Pool) -> set[str]:
    return {project.name for project in pool.client.projects().projects}


def delete_projects_made_since(pool: Pool, before: set[str]) -> None:
    """Delete the projects that were not there `before` (their jobs have all ended); the
    users' defaults that named one go with it (store.projects.delete_project)."""
    for name in sorted(project_names(pool) - before):
        pool.client.delete_project(name)


@pytest.fixture(name="pool")
def pool_fixture(shared_daemon: Pool) -> Iterator[Pool]:
    """The module's daemon, idle with only its first projects again after the test."""
    before = project_names(shared_daemon)
    yield shared_daemon
    end_active_jobs(shared_daemon)
    delete_projects_made_since(shared_daemon, before)


@pytest.fixture(name="own_pool")
def own_pool_fixture(tmp_path: Path, databases: Databases) -> Iterator[Pool]:
    """A daemon of the test's own, on a fresh database of its backend (conftest's `pool`)."""
    own = Pool(tmp_path / "pool", database_url=databases.new_url()).start()
    try:
        yield own
    finally:
        own.cleanup()
