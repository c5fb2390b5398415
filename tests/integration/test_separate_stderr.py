"""`--separate-stderr` (as sbatch -e): the job's stderr in a log of its own, read with
`gpupool logs --stderr` (and --tail), kept across attempts, private to its owner; a job
without it keeps both streams in one log and `--stderr` says so."""

from __future__ import annotations

import os
import stat

from integration.module_daemons import (  # noqa: F401
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import Pool

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test: each test looks only at its own jobs.

SCRIPT = "echo out1; echo err1 >&2; echo out2; echo err2 >&2"


def test_stderr_kept_apart_when_asked(pool: Pool) -> None:
    job_id = pool.cli_submit("--separate-stderr", "--", "sh", "-c", SCRIPT)  # the real CLI
    assert pool.wait(job_id).exit_code == 0
    assert pool.cli("logs", str(job_id), check=True).stdout == "out1\nout2\n"
    assert pool.cli("logs", "--stderr", str(job_id), check=True).stdout == "err1\nerr2\n"
    assert pool.cli("logs", "--stderr", "--tail", "1", str(job_id), check=True).stdout == ("err2\n")
    shown = pool.cli("show", "--json", str(job_id), check=True).stdout
    assert '"separate_stderr": true' in shown
    log = pool.state_dir / "jobs" / str(job_id) / "stderr.log"
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600


def test_stderr_of_a_job_without_it_is_refused_saying_how(pool: Pool) -> None:
    job_id = pool.submit("--", "sh", "-c", SCRIPT)
    assert pool.wait(job_id).exit_code == 0
    assert pool.cli("logs", str(job_id), check=True).stdout == "out1\nerr1\nout2\nerr2\n"
    refused = pool.cli("logs", "--stderr", str(job_id))
    assert refused.returncode == 2
    assert "keeps its stdout and stderr together in one log" in refused.stderr
    assert "--separate-stderr" in refused.stderr


def test_a_gang_cannot_separate_its_stderr(pool: Pool) -> None:
    refused = pool.cli(
        "submit", "--gpus", "2", "--distributed", "torchrun", "--separate-stderr", "--", "true"
    )
    assert refused.returncode == 2
    assert "separate_stderr: cannot be combined with distributed" in refused.stderr
