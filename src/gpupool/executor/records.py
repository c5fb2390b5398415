"""Reading a run's exit record (exit.json, written by its supervisor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpupool.core.execution import ExitReason, ExitRecord, RunUsage
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
            usage=_usage(obj.get("usage")),
            memory_limit_bytes=_optional_int(obj.get("memory_limit_bytes")),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _usage(obj: object) -> RunUsage | None:
    """exit.json's `usage` (supervisor.py's UsageFile); None when absent."""
    if not isinstance(obj, dict):
        return None
    cpu = obj.get("cpu_seconds")
    return RunUsage(
        cpu_seconds=None if cpu is None else float(cpu),
        memory_peak_bytes=_optional_int(obj.get("memory_peak_bytes")),
        memory_mean_bytes=_optional_int(obj.get("memory_mean_bytes")),
        oom_kills=int(obj.get("oom_kills") or 0),
    )
