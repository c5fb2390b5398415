"""Interactive work in a pool with quotas (issue 30, item 2), as Run:ai runs it: a session is
not preemptible and runs within its project's quota; with `--preemptible` it may run above
it on borrowed GPUs, and ends when their owner takes them back. Every refusal names a flag
the command that was refused takes.

Before the fix, `notebook` and `shell` refused in the default project said "ask for
--preemptible", which neither accepted: interactive work was locked out of a pool once any
project had a quota."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.pool_harness import FOREVER, Pool, wait_for
from integration.test_shell import shell_job, terminal

pytestmark = pytest.mark.backend_independent


def test_a_refused_session_is_told_a_flag_it_takes_and_is_accepted_with_it(
    pool: Pool, tmp_path: Path
) -> None:
    pytest.importorskip("jupyter_server", reason="jupyter-server is in the test extra")
    pool.cli("project", "create", "vision", "--quota", "2", check=True)
    for command in (("notebook", "--workdir", str(tmp_path)), ("shell", "--", "true")):
        refused = pool.cli(command[0], "--gpus", "1", *command[1:])
        assert refused.returncode == 2, refused
        assert "project default has no guaranteed quota" in refused.stderr, refused
        assert f"gpupool {command[0]} --preemptible" in refused.stderr, refused
    assert pool.client.jobs() == ()
    started = pool.cli("notebook", "--gpus", "1", "--preemptible", "--workdir", str(tmp_path),
                       check=True, timeout=120)  # fmt: skip
    assert "/?token=" in started.stdout, started
    (job,) = pool.client.jobs()
    assert (job.name, job.priority_name, job.preemptible) == ("notebook", "interactive", True)
    assert job.state.value == "RUNNING"
    pool.cancel(job.id)


def test_a_preemptible_shell_ends_when_its_gpus_are_reclaimed(pool: Pool) -> None:
    """The shell borrows a GPU above the default project's quota (0); vision, within its
    quota of 4, takes it back: the shell is told and closed, and its job ends there rather
    than coming back later as a session nobody holds."""
    pool.cli("project", "create", "vision", "--quota", "4", check=True)
    with terminal(pool, "--gpus", "1", "--preemptible") as term:
        term.read_until(b"exit the shell to give them back")
        session = shell_job(pool)
        claim = pool.submit("--project", "vision", "--gpus", "4", "--", *FOREVER)
        pool.wait_state(claim, "RUNNING")
        said = term.read_until(b"closing the shell")
        assert f"job {session} was preempted" in said, said
        assert term.exit_code() == 129  # 128 + SIGHUP, whatever the shell returned
    ended = wait_for(
        lambda: (j := pool.client.job(session)).state.terminal and j,
        what="the shell's job to end",
    )
    assert ended.state.value == "CANCELLED", ended
    assert ended.restart_count == 1
    pool.cancel(claim)


def test_a_session_within_quota_is_not_preemptible(pool: Pool) -> None:
    pool.cli("project", "create", "vision", "--quota", "2", check=True)
    with terminal(pool, "--gpus", "1", "--project", "vision") as term:
        term.read_until(b"exit the shell to give them back")
        job = pool.client.job(shell_job(pool))
        assert (job.priority_name, job.preemptible) == ("interactive", False)
        term.type("exit 0\n")
        assert term.exit_code() == 0
