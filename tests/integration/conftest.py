"""Fixtures of the integration tests: a real daemon (pool_harness.Pool) on a real database.

Which tests run on both SQLite and PostgreSQL (the rule; docs/ARCHITECTURE.md, "Tests on
both databases"):
- every test that stores or reads jobs, projects or the lease through a daemon runs on both:
  it takes the `pool` fixture, or `databases` for the pools it makes itself (one fresh
  database per pool on PostgreSQL, dropped after the test);
- tests whose outcome the database cannot change run on SQLite only, marked
  `backend_independent` or making a pool without `databases`: the CLI's and the API's
  checks of their input (test_bad_arguments, test_api_input, test_submit_words,
  test_cli_messages, and test_cli_errors' refusals, YAML errors and flags), reaching a
  daemon or not (test_cli_errors, the cut connections of test_submit_retry), the server's
  start-up checks (test_server_start_errors, which checks PostgreSQL URLs itself), the
  local inventory, the daemon's log lines, and a full state disk under SQLite
  (test_faults: the state directory's disk; a PostgreSQL server's disk is its own).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.backends import Backend, Databases, backends
from integration.pool_harness import Pool

BACKEND_INDEPENDENT = "backend_independent"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{BACKEND_INDEPENDENT}: the test's outcome does not depend on the database: its "
        "pool runs on SQLite only (the rule: this module's docstring)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes a pool runs once per backend, unless marked backend_independent."""
    if "databases" not in metafunc.fixturenames:
        return
    independent = metafunc.definition.get_closest_marker(BACKEND_INDEPENDENT) is not None
    params = [Backend.SQLITE] if independent else backends()
    metafunc.parametrize("databases", params, indirect=True, ids=[b.value for b in params])


@pytest.fixture
def databases(request: pytest.FixtureRequest) -> Iterator[Databases]:
    """Fresh databases on this test's backend (the test runs once per backend)."""
    made = Databases(request.param)
    try:
        yield made
    finally:
        made.drop_all()


@pytest.fixture
def backend(databases: Databases) -> Backend:
    return databases.backend


@pytest.fixture
def pool(tmp_path: Path, databases: Databases) -> Iterator[Pool]:
    p = Pool(tmp_path / "pool", database_url=databases.new_url()).start()
    try:
        yield p
    finally:
        p.cleanup()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
