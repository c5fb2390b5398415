"""`gpupool shell` (issue 15) through a real pseudo-terminal against a real daemon: the shell
gets the job's GPUs, its exit code is the command's, the allocation ends when it exits (or
when the command is killed), and while it waits it says where it stands; Ctrl-C then
cancels it."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from integration.pool_harness import Pool, wait_for

FOREVER = ("sh", "-c", "while :; do sleep 1; done")


class Terminal:
    """`gpupool shell ...` on a pseudo-terminal: what it printed, what we type."""

    def __init__(self, pool: Pool, *args: str, sigint: int = signal.SIG_DFL) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the CLI, with the pool's environment
            # What it inherits for SIGINT: a terminal's login shell leaves SIG_DFL; a
            # script's background job (bash's `cmd &`) passes SIG_IGN on through exec.
            signal.signal(signal.SIGINT, sigint)
            env = {**pool.env, "SHELL": "/bin/sh", "PS1": "$ "}
            os.execve(sys.executable, [sys.executable, "-m", "gpupool", "shell", *args], env)
        self.out = b""
        self.status: int | None = None

    def read_until(self, marker: bytes, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while marker not in self.out:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} in {self.out.decode(errors='replace')!r}"
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.2))
            if ready:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:  # the child ended: EIO
                    data = b""
                if not data:
                    assert marker in self.out, f"ended without {marker!r}: {self.out!r}"
                self.out += data
        return self.out.decode(errors="replace")

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def exit_code(self, timeout: float = 60) -> int:
        def ended() -> tuple[int] | None:  # a tuple: an exit code of 0 counts as ended too
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            return (os.waitstatus_to_exitcode(status),) if pid else None

        (code,) = wait_for(ended, timeout, "the shell command to end")
        os.close(self.fd)
        return int(code)


@contextmanager
def terminal(pool: Pool, *args: str, sigint: int = signal.SIG_DFL) -> Iterator[Terminal]:
    term = Terminal(pool, *args, sigint=sigint)
    try:
        yield term
    finally:
        try:
            if os.waitpid(term.pid, os.WNOHANG) == (0, 0):  # still running: a failed test
                os.kill(term.pid, signal.SIGKILL)
                os.waitpid(term.pid, 0)
        except ChildProcessError:
            pass  # already reaped by the test


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[Pool]:
    started = Pool(tmp_path / "pool").start()
    try:
        yield started
    finally:
        started.cleanup()


def shell_job(pool: Pool) -> int:
    (job,) = [j for j in pool.client.jobs(include_finished=True) if j.name == "shell"]
    return job.id


def test_the_shell_has_the_jobs_gpus_and_its_exit_ends_the_allocation(pool: Pool) -> None:
    with terminal(pool, "--gpus", "2") as term:
        term.read_until(b"exit the shell to give them back")
        # $((40+2)): the output says 42, the terminal's echo of what was typed does not
        term.type("echo GPUS=[$CUDA_VISIBLE_DEVICES] JOB=[$GPUPOOL_SHELL_JOB] $((40+2)); exit 3\n")
        shown = term.read_until(b"] 42")
        assert term.exit_code() == 3
    job = pool.client.job(shell_job(pool))
    assert f"JOB=[{job.id}]" in shown
    assert f"GPUS=[{','.join(map(str, job.gpus))}]" in shown and len(job.gpus) == 2
    assert pool.wait(job.id).state.value == "SUCCEEDED"  # the holder saw the end


def test_a_killed_shell_command_still_gives_the_gpus_back(pool: Pool) -> None:
    with terminal(pool, "--gpus", "1") as term:
        term.read_until(b"exit the shell to give them back")
        job_id = shell_job(pool)
        os.kill(term.pid, signal.SIGKILL)  # no cleanup of its own: the kernel closes the FIFO
        os.waitpid(term.pid, 0)
    assert pool.wait(job_id, timeout=60).state.value == "SUCCEEDED"


@pytest.mark.parametrize(
    "sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["sigint-default", "sigint-ignored-by-parent"]
)
def test_waiting_says_where_it_stands_and_ctrl_c_cancels(pool: Pool, sigint: int) -> None:
    """Ctrl-C cancels the waiting request, even when gpupool was started with SIGINT
    ignored (it failed so in CI, run as a background job)."""
    busy = pool.submit("--gpus", "4", "--", *FOREVER)
    pool.wait_state(busy, "RUNNING")
    with terminal(pool, "--gpus", "1", sigint=sigint) as term:
        text = term.read_until(b"waiting (Resources")
        assert "queued: 1 of 1 waiting (Resources: " in text, text
        term.type("\x03")  # Ctrl-C, through the terminal's line discipline
        term.read_until(b"cancelled")
        assert term.exit_code() == 130
    assert pool.client.job(shell_job(pool)).state.value == "CANCELLED"
    pool.cancel(busy)


def test_a_bad_flag_is_refused_naming_it(pool: Pool) -> None:
    refused = pool.cli("shell", "--gpus", "lots")
    assert refused.returncode == 2 and "gpus" in refused.stderr, refused
