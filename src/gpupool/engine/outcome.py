"""What a finished process means for its job: final state, reason code and cause in words."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from gpupool.core.execution import ExitReason, ExitRecord
from gpupool.core.job import EndReason, Job, JobState
from gpupool.core.job_control import retry_wanted
from gpupool.core.units import format_duration, format_size


@dataclass(frozen=True)
class Outcome:
    state: JobState
    exit_code: int | None
    reason: EndReason  # for the REASON column
    cause: str  # words for the job's history


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def outcome_of(record: ExitRecord, time_limit_s: float | None) -> Outcome:
    """The outcome of a run that ended as `record` says (not one PREEMPTED: that one is
    requeued). `time_limit_s`: the limit it ran under, for the history of a TIMEOUT."""
    code, sig, why = record.exit_code, record.signal, record.reason
    if why is ExitReason.TIMEOUT:
        limit = format_duration(time_limit_s) if time_limit_s else "its"
        return Outcome(JobState.TIMEOUT, code, EndReason.TIME_LIMIT, f"time limit {limit} reached")
    if why is ExitReason.CANCELLED:
        # The store appends who asked for the cancel.
        return Outcome(JobState.CANCELLED, code, EndReason.CANCELLED, f"stopped (exit {code})")
    if why is ExitReason.SPAWN_FAILED:
        detail = record.message or f"could not start (exit {code})"
        return Outcome(JobState.FAILED, code, EndReason.SPAWN_FAILED, f"{detail} (exit {code})")
    if why is ExitReason.OUT_OF_MEMORY:
        return Outcome(JobState.FAILED, code, EndReason.OUT_OF_MEMORY, _out_of_memory(record))
    if sig:
        words = f"killed by {_signal_name(sig)} (exit {code})"
        return Outcome(JobState.FAILED, code, EndReason.SIGNAL, words)
    if code == 0:
        return Outcome(JobState.SUCCEEDED, 0, EndReason.NONE, "exited with code 0")
    if code == 127:
        return Outcome(
            JobState.FAILED, code, EndReason.NON_ZERO_EXIT, "command not found (exit 127)"
        )
    return Outcome(JobState.FAILED, code, EndReason.NON_ZERO_EXIT, f"exited with code {code}")


def _out_of_memory(record: ExitRecord) -> str:
    """'out of memory: killed at its --mem limit of 64MiB (peak 64MiB) (exit 137)'."""
    limit = record.memory_limit_bytes
    words = "out of memory: killed at its --mem limit"
    if limit:
        words += f" of {format_size(limit)}"
    peak = None if record.usage is None else record.usage.memory_peak_bytes
    if peak:
        words += f" (peak {format_size(peak)})"
    return f"{words} (exit {record.exit_code})"


def output_lost_text(record: ExitRecord) -> str | None:
    """The history's words when the disk under the run's log was full while it ran (None when
    it never was): 'output lost: its log's disk was full for 1m00s, from 2m10s after the
    start; what the job wrote then is not in its log'."""
    gaps = record.output_lost
    if not gaps:
        return None
    first = format_duration(max(gaps[0][0] - record.start_time, 0.0))
    if len(gaps) == 1:
        ((start, end),) = gaps
        when = f"for {format_duration(end - start)}, from {first} after the start"
    else:
        total = format_duration(sum(end - start for start, end in gaps))
        when = f"{len(gaps)} times, {total} in all, the first {first} after the start"
    return f"output lost: its log's disk was full {when}; what the job wrote then is not in its log"


# Failures a retry is for: the command's own (an exit code, or a signal such as the OOM
# killer's SIGKILL, 137). A time limit, a cancel, or a command that cannot start is not.
_RETRIED = frozenset({EndReason.NON_ZERO_EXIT, EndReason.SIGNAL})


def retry_of(job: Job, result: Outcome) -> str | None:
    """The history's words when `job`'s run ending as `result` is to be run again (--retry),
    else None. Only failed attempts count against the retries (`failed_attempts`): a job
    requeued by preemption keeps them, as Kubernetes' pod failure policy ignores
    disruptions; GPUPOOL_RESTART_COUNT still counts every requeue, as Slurm's does."""
    spec, code = job.spec, result.exit_code
    if result.reason not in _RETRIED or code is None or spec.retries == 0:
        return None
    attempt = job.failed_attempts
    if not retry_wanted(spec.retries, spec.retry_on_exit, attempt, code):
        return None
    total = spec.retries + 1
    return f"attempt {attempt + 1} of {total} failed with exit code {code}; retrying"
