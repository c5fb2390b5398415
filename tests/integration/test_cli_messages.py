"""What the CLI tells a user about a job: how it ended, that a pending job is pending (for
logs and Ctrl-C), that a cancelled job is stopping, and where a job went."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import time

import pytest

from integration.module_daemons import (  # noqa: F401
    own_pool_fixture,
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import Pool, interruptible, wait_for

# the CLI's messages: the same on any database (the rule: integration/conftest.py)
pytestmark = pytest.mark.backend_independent

# `pool`: one daemon for the module (integration/module_daemons.py), idle again after each
# test: each test looks only at its own jobs (`queue` lists the active ones only).


def read_line_with(proc: subprocess.Popen[str], text: str, timeout: float = 60) -> str:
    """Read proc's stderr until a line containing `text` (the process is then where the test
    wants it), within the deadline."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], deadline - time.monotonic())
        if not ready:
            break
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return line
    raise AssertionError(f"no line with {text!r} on stderr: {seen}")


def test_wait_on_a_job_cancelled_before_it_started_says_so(pool: Pool) -> None:
    job_id = pool.submit("--begin", "now+1h", "--", "true")
    pool.cli("cancel", str(job_id), check=True)
    proc = pool.cli("wait", str(job_id))
    assert proc.returncode == 202  # CANCELLED (docs/jobs.md, "What `wait` exits with")
    assert proc.stderr.strip() == f"job {job_id} CANCELLED before it started"
    done = pool.submit("--", "true")
    assert pool.cli("wait", str(done)).stderr.strip() == f"job {done} SUCCEEDED (exit 0)"


def test_logs_of_a_pending_job_say_it_is_pending(pool: Pool) -> None:
    job_id = pool.submit("--begin", "now+1h", "--", "true")
    proc = pool.cli("logs", str(job_id))
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr.strip() == (
        f"job {job_id} is pending: no output yet (gpupool logs -f {job_id} waits for it to start)"
    )


def test_ctrl_c_on_a_pending_job_says_it_stays_queued(pool: Pool) -> None:
    for verb in (["submit", "--wait", "--begin", "now+1h", "--", "true"], ["logs", "-f"]):
        args = verb if verb[0] == "submit" else [*verb, str(pool.client.jobs()[0].id)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpupool", *args],
            env=pool.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=interruptible,
        )
        note = read_line_with(proc, "is pending: its output follows when it starts")
        job_id = int(note.split()[1])
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130
        assert f"job {job_id} stays queued (pending): gpupool why {job_id}" in err, err
        assert "keeps running" not in err and "Traceback" not in err
        assert pool.client.job(job_id).state == "PENDING"


def test_a_job_in_its_cancel_grace_shows_it_is_stopping(own_pool: Pool) -> None:
    pool = own_pool  # its job outlives the test (5 minutes' grace): only a daemon's end ends it
    # Ignores SIGTERM: it stays RUNNING for its whole grace period (5 minutes).
    job_id = pool.submit(
        "--name", "stubborn", "--grace", "5m", "--", "sh", "-c",
        "trap '' TERM; echo ready; while :; do sleep 1; done",
    )  # fmt: skip
    pool.wait_state(job_id, "RUNNING")
    wait_for(lambda: "ready" in pool.log(job_id), what="the trap to be set")
    assert pool.cli("cancel", str(job_id), check=True).stdout.strip() == f"job {job_id}: cancelling"
    row = next(r for r in pool.cli("queue", check=True).stdout.splitlines() if "stubborn" in r)
    assert "RUNNING" in row and row.rstrip().endswith("Cancelling"), row
    shown = pool.cli("show", str(job_id), check=True).stdout
    assert "RUNNING  [Cancelling]" in shown


def test_plan_power_names_its_source(pool: Pool) -> None:
    out = pool.cli(
        "plan", "power", "--volts", "208", "--amps", "60", "--phases", "3", "--server-kw", "6.5",
        check=True,
    ).stdout  # fmt: skip
    assert "seed 0" not in out
    assert 'Lambda\'s "Building a GPU cluster"' in out
