"""Shared fixtures. With GPUPOOL_REQUIRE_ALL=1 (CI), a skipped test is a failure: every
integration test must really run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

# No time limit per example: the suite runs on busy 2-core machines (CI beside a CPU hog),
# where one example of a pure property test took 254 ms against hypothesis's 200 ms
# default and failed as "flaky". Speed is measured in bench/, not in tests.
settings.register_profile("gpupool", deadline=None)
settings.load_profile("gpupool")


_pg_server = None


def pytest_configure(config: pytest.Config) -> None:
    """Give the store tests a real PostgreSQL unless GPUPOOL_TEST_POSTGRES_URL names one.

    Runs before collection: the store tests read the URL when they are imported."""
    global _pg_server
    if os.environ.get("GPUPOOL_NO_POSTGRES"):
        return
    if os.environ.get("GPUPOOL_TEST_POSTGRES_URL"):
        _database_of_this_worker()
        return
    from pg_server import PostgresServer, PostgresUnavailable

    try:
        _pg_server = PostgresServer().start()
    except PostgresUnavailable as exc:
        if os.environ.get("GPUPOOL_REQUIRE_ALL") == "1":
            raise pytest.UsageError(f"store tests on PostgreSQL cannot run: {exc}") from None
        return
    os.environ["GPUPOOL_TEST_POSTGRES_URL"] = _pg_server.url


def _database_of_this_worker() -> None:
    """Under pytest-xdist (`make test` runs the suite in parallel) every worker inherits the
    server's URL from the controller; the store tests empty the public schema of the
    database they are given, so each worker gets a database of its own on that server."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    import sqlalchemy as sa
    from pg_server import run_outside_a_transaction

    server = os.environ["GPUPOOL_TEST_POSTGRES_URL"]
    name = f"gpupool_test_{worker}"
    run_outside_a_transaction(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    run_outside_a_transaction(server, f"CREATE DATABASE {name}")
    url = sa.make_url(server).set(database=name).render_as_string(hide_password=False)
    os.environ["GPUPOOL_TEST_POSTGRES_URL"] = url


def pytest_unconfigure(config: pytest.Config) -> None:
    if _pg_server is not None:
        _pg_server.stop()
        os.environ.pop("GPUPOOL_TEST_POSTGRES_URL", None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("GPUPOOL_REQUIRE_ALL") == "1" and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under GPUPOOL_REQUIRE_ALL=1 (every test must run): {reason}"


# Where the suite's time goes, per file (issue 38): each test's setup, call and teardown,
# added up by file on the process that reports (xdist's controller), printed at the end of
# every run so that a CI log says which files to look at when the suite grows slower.
_seconds_by_file: dict[str, float] = {}
SLOWEST_FILES_SHOWN = 15


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _seconds_by_file[path] = _seconds_by_file.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    if hasattr(config, "workerinput") or not _seconds_by_file:
        return  # an xdist worker: its controller prints the whole run's
    total = sum(_seconds_by_file.values())
    slowest = sorted(_seconds_by_file.items(), key=lambda item: -item[1])[:SLOWEST_FILES_SHOWN]
    terminalreporter.write_sep("=", f"slowest {len(slowest)} test files (seconds of tests)")
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}  {100 * seconds / total:5.1f}%  {path}")
    terminalreporter.write_line(f"{total:8.1f}  in all, over {len(_seconds_by_file)} files")
