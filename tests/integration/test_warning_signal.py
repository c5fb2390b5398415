"""A warning signal before the time limit, as sbatch --signal, with a real daemon and the
real CLI: `gpupool submit --time 6s --signal USR1@3` reaches the job's trap 3 s before its
limit, and a bad --signal is refused at submit naming the field (docs/jobs.md, "A warning
before the time limit"); with cgroups, every process of the job gets it, those that left
its session too."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpupool.executor.cgroup_plan import CgroupVersion, plan_cgroups
from integration.module_daemons import (  # noqa: F401
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import Pool

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test: each test looks only at its own jobs.

# What a Slurm user writes: save a checkpoint on USR1 and end (`wait` returns at once for a
# trapped signal; the `sleep` gets the USR1 too, as every process of the job does).
CHECKPOINTER = """
trap 'echo "USR1 trapped: saving a checkpoint"; exit 0' USR1
echo started
while :; do sleep 0.1 & wait $!; done
"""


def test_submit_signal_reaches_the_jobs_trap_before_its_time_limit(pool: Pool) -> None:
    job = pool.cli_submit("--time", "6s", "--signal", "USR1@3", "--", "bash", "-c", CHECKPOINTER)
    final = pool.wait(job)
    log = pool.log(job)
    assert final.state == "SUCCEEDED", (final, log)  # it ended itself, as its trap says
    assert "gpupool: sending SIGUSR1, 3 s before the time limit\n" in log
    assert log.index("sending SIGUSR1") < log.index("USR1 trapped: saving a checkpoint")
    assert "time limit of 6 s reached" not in log
    assert final.start_time is not None and final.end_time is not None
    assert 1.0 <= final.end_time - final.start_time < 6.0, final


def test_a_bad_signal_is_refused_at_submit_naming_the_field(pool: Pool) -> None:
    for value, said in [
        ("NOPE@3", "signal: no signal 'NOPE'"),
        ("USR1", "signal: needs a time before the limit"),
        ("USR1@0", "signal: the time before the limit must be a positive duration"),
    ]:
        bad = pool.cli("submit", "--signal", value, "--", "true")
        assert bad.returncode == 2, bad
        assert f"gpupool: invalid job spec: {said}" in bad.stderr, bad


# A process that leaves the job's session (setsid): only the job's cgroup still holds it.
# On USR1 it writes argv[1]; the job's shell ends once it has.
ESCAPED = """
import os, pathlib, signal, sys, time
os.setsid()
def got(*_):
    pathlib.Path(sys.argv[1]).write_text("got USR1")
signal.signal(signal.SIGUSR1, got)
pathlib.Path(sys.argv[1] + ".ready").touch()
time.sleep(60)
"""
ESCAPER = """
"$0" -c "$1" "$2" &
trap 'until [ -e "$2" ]; do sleep 0.05; done; exit 0' USR1
while :; do sleep 0.1 & wait $!; done
"""


@pytest.mark.skipif(
    not (
        os.geteuid() == 0 and plan_cgroups(Path("/nonexistent")).version is not CgroupVersion.NONE
    ),
    reason="needs root and a cgroup hierarchy (CI has both)",
)
def test_with_cgroups_it_reaches_a_process_that_left_the_jobs_session(
    pool: Pool, tmp_path: Path
) -> None:
    got = tmp_path / "escaped"
    script = ["bash", "-c", ESCAPER, sys.executable, ESCAPED, str(got)]
    job = pool.cli_submit("--time", "8s", "--signal", "USR1@4", "--", *script)
    final = pool.wait(job)
    log = pool.log(job)
    assert got.read_text() == "got USR1", log  # not in the session: found in the cgroup
    assert final.state == "SUCCEEDED", (final, log)


def test_show_and_the_api_say_the_signal_a_job_asked_for(pool: Pool) -> None:
    """What `--signal` a job named is in `show` and the API's `signal` (as the user wrote
    it); a job that named none shows no such line (the checkpoint default applies)."""
    asked = pool.cli_submit(
        "--begin", "now+1h", "--time", "1h", "--signal", "USR2@90", "--", "true"
    )
    off = pool.cli_submit("--begin", "now+1h", "--signal", "none", "--", "true")
    plain = pool.cli_submit("--begin", "now+1h", "--", "true")
    assert pool.client.job(asked).signal == "USR2@90"
    assert pool.client.job(off).signal == "none"
    assert pool.client.job(plain).signal is None
    shown = pool.cli("show", str(asked))
    assert shown.returncode == 0, shown
    assert "Signal          SIGUSR2 90 s before the time limit\n" in shown.stdout, shown.stdout
    assert (
        "Signal          none (not even the checkpoint default)\n"
        in pool.cli("show", str(off)).stdout
    )
    assert "Signal " not in pool.cli("show", str(plain)).stdout
    for job in (asked, off, plain):
        pool.cli("cancel", str(job))
