"""What a finished process means for its job: final state, reason code and cause in words."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from gpupool.core.job import JobState
from gpupool.core.units import format_duration


@dataclass(frozen=True)
class Outcome:
    state: JobState
    exit_code: int | None
    reason: str  # short code for the REASON column
    cause: str  # words for the job's story


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def outcome_of(record: object, time_limit_s: float | None) -> Outcome:
    """Map an executor ExitRecord (exit_code, signal, reason, message) to a job outcome."""
    code: int = record.exit_code
    sig: int | None = record.signal
    why: str = record.reason
    message: str = getattr(record, "message", "") or ""
    if why == "timeout":
        limit = format_duration(time_limit_s) if time_limit_s else "its"
        return Outcome(JobState.TIMEOUT, code, "TimeLimit", f"time limit {limit} reached")
    if why == "cancelled":
        # The store appends who asked for the cancel.
        return Outcome(JobState.CANCELLED, code, "Cancelled", f"stopped (exit {code})")
    if why == "spawn_failed":
        detail = message or f"could not start (exit {code})"
        return Outcome(JobState.FAILED, code, "SpawnFailed", f"{detail} (exit {code})")
    if sig:
        return Outcome(
            JobState.FAILED, code, "Signal", f"killed by {_signal_name(sig)} (exit {code})"
        )
    if code == 0:
        return Outcome(JobState.SUCCEEDED, 0, "", "exited with code 0")
    if code == 127:
        return Outcome(JobState.FAILED, code, "NonZeroExit", "command not found (exit 127)")
    return Outcome(JobState.FAILED, code, "NonZeroExit", f"exited with code {code}")
