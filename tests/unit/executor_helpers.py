"""Waiting helpers shared by the executor tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpupool.executor import ExitRecord, LocalExecutor


def wait_for(pred: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_exit(ex: LocalExecutor, job_id: int, timeout: float = 10.0) -> ExitRecord:
    rec = wait_for(lambda: ex.read_exit(job_id), timeout, f"exit of job {job_id}")
    assert isinstance(rec, ExitRecord)
    return rec
