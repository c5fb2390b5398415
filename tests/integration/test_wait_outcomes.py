"""`gpupool wait` exits 0 only for a job that SUCCEEDED, with a code of its own for each other
end, through the real CLI (docs/jobs.md, "What `wait` exits with"; issue 30, item 4).

A script that exits 0 on SIGTERM (as Lightning-style training scripts do) used to make
`wait J && evaluate` go on after its run was cancelled or hit its time limit: `wait` exited
with the script's own 0."""

from __future__ import annotations

import sys

from integration.module_daemons import (  # noqa: F401
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import Pool, wait_for

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test: each test looks only at its own jobs.

PY = sys.executable

# Catches SIGTERM and exits 0 from it; says `ready` once the handler is in place.
CLEAN_ON_TERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""

TIMED_OUT, CANCELLED = 201, 202  # docs/jobs.md, "What `wait` exits with"


def test_wait_exits_non_zero_for_a_cancelled_job_whose_script_exits_0(pool: Pool) -> None:
    job = pool.submit("--grace", "5s", "--", PY, "-c", CLEAN_ON_TERM)
    wait_for(lambda: "ready" in pool.log(job), what="its SIGTERM handler")
    pool.cli("cancel", str(job), check=True)
    waited = pool.cli("wait", str(job))
    ended = pool.client.job(job)
    assert ended.state == "CANCELLED" and ended.exit_code == 0, ended
    assert waited.returncode == CANCELLED, waited
    assert waited.stderr.strip() == f"job {job} CANCELLED (exit 0)"


def test_wait_exits_non_zero_for_a_timed_out_job_whose_script_exits_0(pool: Pool) -> None:
    job = pool.submit("--time", "2s", "--grace", "5s", "--", PY, "-c", CLEAN_ON_TERM)
    waited = pool.cli("wait", str(job))
    ended = pool.client.job(job)
    assert ended.state == "TIMEOUT" and ended.exit_code == 0, ended
    assert waited.returncode == TIMED_OUT, waited
    # submit --wait reads the same table
    proc = pool.cli("submit", "--wait", "--time", "2s", "--", PY, "-c", CLEAN_ON_TERM)
    assert proc.returncode == TIMED_OUT, proc


def test_a_failed_job_keeps_its_own_code_and_one_cancelled_before_it_ran_has_the_cancel_code(
    pool: Pool,
) -> None:
    failed = pool.submit("--", PY, "-c", "import sys; sys.exit(7)")
    assert pool.cli("wait", str(failed)).returncode == 7
    never = pool.submit("--begin", "now+1h", "--", "true")
    pool.cli("cancel", str(never), check=True)
    proc = pool.cli("wait", str(never))
    assert proc.returncode == CANCELLED, proc
    assert proc.stderr.strip() == f"job {never} CANCELLED before it started"
