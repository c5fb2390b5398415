"""--retry with a real daemon: a failed attempt is run again with the same id, its restart
count one more, in the same checkpoint directory; codes not listed are not retried."""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

from integration.module_daemons import (  # noqa: F401
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import Pool

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test: each test looks only at its own jobs.

PY = sys.executable

# Counts its attempts in the checkpoint directory; fails with code 33 until the third.
FLAKY = """
import os, pathlib, sys
d = pathlib.Path(os.environ["GPUPOOL_CHECKPOINT_DIR"])
n = len(list(d.glob("attempt-*")))
(d / f"attempt-{n}").write_text(os.environ["GPUPOOL_RESTART_COUNT"])
pathlib.Path(sys.argv[1]).write_text(str(d))
sys.exit(33 if n < 2 else 0)
"""


def test_a_job_failing_twice_then_succeeding_ends_succeeded_after_two_retries(
    pool: Pool, tmp_path: Path
) -> None:
    script, where = tmp_path / "flaky.py", tmp_path / "where"
    script.write_text(FLAKY)
    job_id = pool.submit(
        "--retry", "3", "--retry-on-exit", "33,137", "--", PY, str(script), str(where)
    )
    job = pool.wait(job_id)
    assert job.state == "SUCCEEDED", job
    assert (job.restart_count, job.failed_attempts) == (2, 2)
    checkpoints = Path(where.read_text())
    assert checkpoints.name == str(job_id)
    restart_counts = [(checkpoints / f"attempt-{n}").read_text() for n in range(3)]
    assert restart_counts == ["0", "1", "2"]  # one directory for every attempt
    assert stat.S_IMODE(os.stat(checkpoints).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(checkpoints.parent).st_mode) == 0o711
    history = pool.cli("show", str(job_id), check=True).stdout
    assert "attempt 1 of 4 failed with exit code 33; retrying" in history
    assert "attempt 2 of 4 failed with exit code 33; retrying" in history
    assert re.search(r"\nRestarts +2 \(2 after a failure\)\n", history), history


def test_an_exit_code_not_listed_is_not_retried(pool: Pool, tmp_path: Path) -> None:
    job_id = pool.submit("--retry", "3", "--retry-on-exit", "33", "--", PY, "-c", "exit(5)")
    job = pool.wait(job_id)
    assert job.state == "FAILED", job
    assert job.exit_code == 5
    assert job.restart_count == 0


def test_retries_stop_after_n(pool: Pool, tmp_path: Path) -> None:
    job_id = pool.submit("--retry", "1", "--", PY, "-c", "exit(7)")
    job = pool.wait(job_id)
    assert job.state == "FAILED", job
    assert job.exit_code == 7
    assert job.restart_count == 1


def test_bad_retry_values_are_refused_at_submit_naming_the_field(pool: Pool) -> None:
    proc = pool.cli("submit", "--retry", "-1", "--", "true")
    assert proc.returncode == 2
    assert "retry: must be a whole number of retries >= 0, got '-1'" in proc.stderr
    proc = pool.cli("submit", "--array", "5-1", "--", "true")
    assert proc.returncode == 2
    assert "array: range '5-1' ends before it starts" in proc.stderr
