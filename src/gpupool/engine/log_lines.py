"""The words of the daemon's log: what happened to a job or a project, in one line each.

The daemon's log is read by people (an admin tailing it, a user's question answered from it),
so every line says what happened with figures, not Python reprs: `job 12 started on box:0,1`,
`job 12 SUCCEEDED (exit 0) after 3m02s`, `project vision changed by alice: quota 4 -> 8`.
The timestamp in front is the logging configuration's (cli/server.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpupool.core.job import Job, JobState
from gpupool.core.space import StorageFull
from gpupool.core.units import format_duration, format_size, plural


def placement(node: str | None, gpus: Sequence[int]) -> str:
    """'box:0,1' (GPUs 0 and 1 of node box); 'box (no GPU)'."""
    if not gpus:
        return f"{node or '?'} (no GPU)"
    return f"{node or '?'}:{','.join(str(g) for g in gpus)}"


def gpu_amount_text(gpus: float) -> str:
    """'1 GPU', '0.5 GPU', 'no GPU'."""
    return plural(gpus, "GPU") if gpus else "no GPU"


def job_started(job: Job) -> str:
    text = f"job {job.id} started on {placement(job.node, job.gpus)}"
    if job.gpu_memory_bytes is not None:
        text += f" ({format_size(job.gpu_memory_bytes)} of the GPU's memory)"
    return text


def job_ended(job: Job, state: JobState, exit_code: int | None, end_time: float, cause: str) -> str:
    """'job 12 SUCCEEDED (exit 0) after 3m02s', or with the cause when it did not succeed:
    'job 12 FAILED (exit 1) after 5s: exited with code 1'."""
    code = "no exit code" if exit_code is None else f"exit {exit_code}"
    text = f"job {job.id} {state.value} ({code})"
    if job.start_time is not None:
        text += f" after {format_duration(end_time - job.start_time)}"
    if state is not JobState.SUCCEEDED and cause:
        text += f": {cause}"
    return text


def jobs_left_running(count: int) -> str:
    """'stopping: 3 jobs keep running under their supervisors'."""
    if count == 0:
        return "stopping: no job is running"
    if count == 1:
        return "stopping: 1 job keeps running under its supervisor"
    return f"stopping: {plural(count, 'job')} keep running under their supervisors"


def disk_full_text(full: StorageFull) -> str:
    """'the state disk is full (0B free in /var/lib/gpupool, 1MiB needed)', or 'the database
    server has no space left': what the daemon says of a full disk, running or starting."""
    if full.path is None:
        return "the database server has no space left"
    free = "?" if full.available_bytes is None else format_size(full.available_bytes)
    needed = format_size(full.needed_bytes)
    return f"the state disk is full ({free} free in {full.path}, {needed} needed)"


def not_done_disk_full(what: str, full: StorageFull) -> str:
    """'engine: could not store the pending jobs' reasons: the state disk is full (0B free
    in /var/lib/gpupool, 1MiB needed); done again once space is freed'."""
    return f"{what}: {disk_full_text(full)}; done again once space is freed"


def cannot_run_disk_full(full: StorageFull) -> str:
    """'the state disk is full (0B free in /var/lib/gpupool, 1MiB needed): the daemon cannot
    run; free some space, then start it again' (it cannot write its database, at start)."""
    return f"{disk_full_text(full)}: the daemon cannot run; free some space, then start it again"
