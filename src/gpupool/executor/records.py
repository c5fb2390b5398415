"""Reading a run's exit record (exit.json, written by its supervisor)."""

from __future__ import annotations

from pathlib import Path

from gpupool.core.execution import ExitReason, ExitRecord
from gpupool.executor.files import read_json

__all__ = ["ExitRecord", "JobBusyError", "read_exit_record"]


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
            reason=ExitReason.parse(str(obj["reason"])),
            start_time=float(obj["start_time"]),
            end_time=float(obj["end_time"]),
            message=str(obj.get("message", "")),
            output_lost=tuple((float(a), float(b)) for a, b in obj.get("output_lost", [])),
        )
    except (KeyError, TypeError, ValueError):
        return None
