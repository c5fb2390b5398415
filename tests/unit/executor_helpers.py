"""Helpers shared by the executor tests: waiting with a deadline, and the executor contract
(core/execution.py) spoken by job id, as these tests think of a job: `launch` makes the
LaunchRequest of the job's current attempt, `state_of`, `cancel` and `preempt` poll and signal
that run."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpupool.core.execution import (
    Allocation,
    ExitRecord,
    Handle,
    LaunchRequest,
    RankLayout,
    RunState,
    StopKind,
)
from gpupool.executor import LocalExecutor
from gpupool.executor.files import process_alive, read_json

# Deadlines are generous: they only matter when a test fails, and a busy 2-core machine
# can take seconds to start a process.
DEADLINE_S = 60.0


def current(ex: LocalExecutor, job_id: int) -> Handle:
    """The handle of the job's current run: attempt n after n archived runs."""
    return Handle(int(job_id), ex.attempt_count(job_id))


def launch(
    ex: LocalExecutor,
    job_id: int,
    command: Sequence[str],
    env: Mapping[str, str],
    workdir: str = "/",
    time_limit_s: float | None = None,
    grace_s: float = 1.0,
    *,
    user: str | None = None,
    umask: int | None = None,
    ranks: RankLayout | None = None,
) -> Handle:
    """`ex.launch` of the job's current attempt on the local pool (no GPUs); its handle."""
    handle = current(ex, job_id)
    ex.launch(
        LaunchRequest(
            handle=handle,
            command=tuple(command),
            env=dict(env),
            workdir=str(workdir),
            time_limit_s=time_limit_s,
            grace_s=grace_s,
            allocation=Allocation("local", ()),
            user=user,
            umask=umask,
            ranks=ranks,
        )
    )
    return handle


def state_of(ex: LocalExecutor, job_id: int) -> RunState:
    """What a poll says of the job's current run."""
    handle = current(ex, job_id)
    return ex.poll([handle])[handle].state


def cancel(ex: LocalExecutor, job_id: int) -> bool:
    return ex.signal(current(ex, job_id), StopKind.CANCEL)


def preempt(ex: LocalExecutor, job_id: int) -> bool:
    return ex.signal(current(ex, job_id), StopKind.PREEMPT)


def wait_for(pred: Callable[[], Any], timeout: float = DEADLINE_S, what: str = "condition") -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_exit(ex: LocalExecutor, job_id: int, timeout: float = DEADLINE_S) -> ExitRecord:
    rec = wait_for(lambda: ex.read_exit(job_id), timeout, f"exit of job {job_id}")
    assert isinstance(rec, ExitRecord)
    return rec


def stop_everything(executor: LocalExecutor) -> None:
    """Leave nothing running: stop live supervisors, then any job group left without one."""
    jobs = executor.state_dir / "jobs"
    for d in jobs.iterdir() if jobs.exists() else []:
        cancel(executor, int(d.name))
        child = read_json(d / "child.json") or {}
        ticks = child.get("start_ticks")
        if ticks and not (d / "exit.json").exists() and process_alive(child["pid"], ticks):
            os.killpg(child["pgid"], signal.SIGKILL)
    for d in jobs.iterdir() if jobs.exists() else []:
        end = time.monotonic() + DEADLINE_S
        while state_of(executor, int(d.name)) == RunState.RUNNING and time.monotonic() < end:
            time.sleep(0.01)
    executor.close()
    executor.reap()


def caught_starting(
    ex: LocalExecutor, workdir: Path, stop: Callable[[int], bool], reason: str
) -> tuple[int, Path, ExitRecord]:
    """A job stopped (`stop`: `cancel` or `preempt` of this module) while its supervisor was
    still starting: (its id, the file its command would have made, its exit record).

    A stop right after start usually finds the supervisor still in interpreter start-up and
    takes its claim; on a loaded machine the supervisor may claim first (then it is a stop of
    a running job, tested apart). Fresh jobs until one is caught starting: at most 20."""
    path = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for job_id in range(1, 21):
        marker = workdir / f"ran-{job_id}"
        launch(ex, job_id, ["touch", str(marker)], path, "/", None, 1.0)
        stop(job_id)  # True unless the command has already ended
        rec = ex.read_exit(job_id)
        if rec is not None and (rec.reason, rec.exit_code) == (reason, 143):
            return job_id, marker, rec  # we took the claim: the supervisor steps aside
        wait_exit(ex, job_id)  # the supervisor had claimed: over another way
    raise AssertionError(f"no {reason} stop found the supervisor still starting in 20 tries")
