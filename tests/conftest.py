"""Shared fixtures. With GPUPOOL_REQUIRE_ALL=1 (CI), a skipped test is a failure: every
integration test must really run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("GPUPOOL_REQUIRE_ALL") == "1" and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under GPUPOOL_REQUIRE_ALL=1 (every test must run): {reason}"
