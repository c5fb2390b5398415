"""Fixtures shared by the unit tests."""

from __future__ import annotations

import shutil
import tempfile
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


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A fresh directory with a short path, unlike pytest's own under xdist: an MPS pipe
    directory's path must stay under 80 bytes (UNIX socket paths), or mps.py refuses it."""
    path = Path(tempfile.mkdtemp(prefix="mps-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
