"""Waiting helpers shared by the executor tests."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from gpupool.core.execution import ExitRecord, RunState
from gpupool.executor import LocalExecutor
from gpupool.executor.files import process_alive, read_json

# Deadlines are generous: they only matter when a test fails, and a busy 2-core machine
# can take seconds to start a process.
DEADLINE_S = 60.0


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
        executor.cancel(int(d.name))
        child = read_json(d / "child.json") or {}
        ticks = child.get("start_ticks")
        if ticks and not (d / "exit.json").exists() and process_alive(child["pid"], ticks):
            os.killpg(child["pgid"], signal.SIGKILL)
    for d in jobs.iterdir() if jobs.exists() else []:
        end = time.monotonic() + DEADLINE_S
        while executor.status(int(d.name)) == RunState.RUNNING and time.monotonic() < end:
            time.sleep(0.01)
    executor.close()
    executor.reap()
