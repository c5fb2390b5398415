"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from executor_helpers import stop_everything

from gpupool.executor import LocalExecutor


@pytest.fixture
def ex(tmp_path: Path) -> Iterator[LocalExecutor]:
    """An executor on a fresh state dir that leaves nothing running behind it."""
    executor = LocalExecutor(tmp_path / "state")
    yield executor
    stop_everything(executor)
