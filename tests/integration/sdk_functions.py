"""Functions the SDK tests run as pool jobs (tests/integration/test_sdk.py): in a module of
their own, so that a job imports this small module by reference, not the test module."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from gpupool.sdk import job


def add(a: int, b: int, *, times: int = 1) -> int:
    return (a + b) * times


def square(x: int) -> int:
    return x * x


def square_or_fail(x: int) -> int:
    if x < 0:
        raise ValueError(f"no negative numbers: {x}")
    return x * x


def fails(message: str) -> None:
    raise ValueError(message)


class LockedError(Exception):
    """An exception that cannot be pickled (it holds a lock): it comes back as RemoteError."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


def fails_unpicklably(message: str) -> None:
    raise LockedError(message)


def killed() -> None:
    """Dies as the OOM killer would kill it: SIGKILL, no result written."""
    os.kill(os.getpid(), signal.SIGKILL)


def until_file(path: str) -> str:
    """Runs until `path` exists (the test creates it, or cancels the job)."""
    while not Path(path).exists():
        time.sleep(0.05)
    return "released"


@job(gpus=0, time="10m")
def triple(x: int) -> int:
    """Decorated where it is defined: `triple` in this module is the PoolFunction, so
    cloudpickle sends the function by value."""
    return 3 * x
