"""The test harness's own contract: a daemon that never answers is not left running."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.pool_harness import Pool


class SilentPool(Pool):
    """A "daemon" that runs but never answers (as one whose socket path was too long)."""

    def wrap(self, cmd: list[str]) -> list[str]:
        return ["sleep", "600"]


def test_a_daemon_that_never_answers_is_stopped_before_the_error(tmp_path: Path) -> None:
    pool = SilentPool(tmp_path / "pool")
    with pytest.raises(TimeoutError, match="did not answer"):
        pool.start(timeout=0.5)
    assert pool.proc is not None and pool.proc.poll() is not None
