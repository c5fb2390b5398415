"""Headless Chromium for the dashboard's tests, driven by Playwright.

Playwright's own browser download does not work everywhere (not on CI's machines): the
tests drive the system's Chromium (Debian package `chromium`; scripts/system-deps.sh installs
it) through `executable_path`. Without Chromium or the `playwright` package the tests are
skipped with the reason, which GPUPOOL_REQUIRE_ALL=1 turns into a failure (tests/conftest.py).

Screenshots go to `$GPUPOOL_ARTIFACTS/dashboard/` when that is set (CI keeps it), else to
`test-artifacts/dashboard/` in the repository (ignored by git), to be looked at.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    """`$GPUPOOL_CHROMIUM` (when that file exists), else the first Chromium on PATH."""
    given = os.environ.get("GPUPOOL_CHROMIUM")
    if given:
        return given if os.access(given, os.X_OK) else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def artifacts_dir() -> Path:
    base = os.environ.get("GPUPOOL_ARTIFACTS")
    path = (Path(base) if base else ROOT / "test-artifacts") / "dashboard"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium (skips the test when there is none, or no playwright)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[test]')")
    executable = chromium_path()
    if executable is None:
        given = os.environ.get("GPUPOOL_CHROMIUM")
        where = f"at $GPUPOOL_CHROMIUM ({given})" if given else "on PATH"
        pytest.skip(f"no Chromium {where}: apt-get install chromium (scripts/system-deps.sh)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=["--no-sandbox", "--headless", "--disable-gpu"],
        )
        try:
            yield browser
        finally:
            browser.close()
