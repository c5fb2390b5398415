"""What the executor reports about a job: its exit record and its status."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from gpupool.executor.files import read_json


@dataclass(frozen=True)
class ExitRecord:
    exit_code: int  # 128+N when killed by signal N, as shells report it
    signal: int | None
    reason: str  # "exited" | "timeout" | "cancelled" | "preempted" | "spawn_failed"
    start_time: float
    end_time: float
    message: str


class JobStatus(str, Enum):
    RUNNING = "running"  # a live supervisor owns it, or ours is still starting
    EXITED = "exited"  # exit.json recorded
    LOST = "lost"  # claimed, but the supervisor died without recording an exit
    UNLAUNCHED = "unlaunched"  # never claimed: safe to launch (again)


class JobBusyError(RuntimeError):
    """archive() of a run whose supervisor (or main process) is still alive."""


def read_exit_record(path: Path) -> ExitRecord | None:
    """The exit record in ``path`` (an exit.json), or None when missing or unreadable."""
    obj = read_json(path)
    if obj is None:
        return None
    try:
        sig = obj.get("signal")
        return ExitRecord(
            exit_code=int(obj["exit_code"]),
            signal=None if sig is None else int(sig),
            reason=str(obj["reason"]),
            start_time=float(obj["start_time"]),
            end_time=float(obj["end_time"]),
            message=str(obj.get("message", "")),
        )
    except (KeyError, TypeError, ValueError):
        return None
