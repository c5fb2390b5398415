"""`gpupool why ID` and `gpupool queue --priority`: why a job waits, and when it will start."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from gpupool.cli.render import clock_time, elapsed, print_json, print_table, shown
from gpupool.client import Client, JobView, Wait, WaitCode
from gpupool.core.job_enums import JobState
from gpupool.core.units import format_duration, format_size

# The dimensions whose figures are bytes (policy/reasons.py's Dimension values).
_BYTES = ("gpu_memory", "memory")
# The fields of a job `why --json` prints (the job's wire fields of the same names).
WHY_FIELDS = (
    "id",
    "state",
    "reason",
    "why",
    "wait",
    "estimated_start",
    "reservation",
    "priority_factors",
    "begin_time",
)


def describe(job: JobView, now: float | None = None) -> list[str]:
    """The answer to "why is my job not running, and when will it?" as lines of text."""
    now = now or time.time()
    head = f"job {job.id} ({job.name}) is {job.state.value}"
    if job.state is JobState.RUNNING and job.backend is not None:
        run = f" ({job.backend_ref})" if job.backend_ref else ""
        return [
            f"{head} in backend {job.backend}{run} since {clock_time(job.start_time)} "
            f"({elapsed(job, now)})"
        ]
    if job.state is JobState.RUNNING:
        gpus = ",".join(map(str, job.gpus)) or "no GPUs"
        return [
            f"{head} on {job.node} (GPUs {gpus}) since {clock_time(job.start_time)} "
            f"({elapsed(job, now)})"
        ]
    if job.state is not JobState.PENDING:
        return [f"{head}: {job.events[-1].cause if job.events else ''}"]
    lines = [f"{head} [{job.reason or 'waiting for the next scheduling pass'}]"]
    if job.why:
        lines.append(f"  why: {job.why}")
    binding = binding_text(job.wait)
    if binding:
        lines.append(f"  binding: {binding}")
    lines.append(f"  expected start: {estimate_text(job, now)}")
    factors = job.priority_factors
    if factors:
        lines.append(
            f"  priority: class {job.priority_name} ({factors.klass}), "
            f"fair share {factors.fairshare:.2f}, service {factors.service:.2f}, "
            f"age {factors.age:.2f}, size {factors.size:.2f} -> score {factors.score:.0f}"
        )
    return lines


def binding_text(wait: Wait | None) -> str:
    """The binding dimension of a waiting job and its figures, from the API's `wait`, e.g.
    "gpu_count on box: 4 requested, 1 free, 8 at most"; "" when none binds."""
    if wait is None or not wait.dimension:
        return ""
    dim = wait.dimension

    def figure(value: float | None) -> str:
        if value is None:
            return "?"
        return format_size(int(value)) if dim in _BYTES else f"{value:g}"

    if wait.node:
        where = f" on {wait.node}"
    elif wait.project:
        where = f" of project {wait.project}"
    else:
        where = " across the pool"
    return (
        f"{dim}{where}: {figure(wait.requested)} requested, {figure(wait.free)} free, "
        f"{figure(wait.capacity)} at most"
    )


def estimate_text(job: JobView, now: float) -> str:
    at = job.estimated_start
    code = job.wait_code
    if at is None and code is WaitCode.QUOTA_NEVER_FITS:
        return "never, while its project's quota and limit stay as they are (see why)"
    if at is None:
        if code is WaitCode.PRIORITY:
            return "unknown: jobs ahead of it start first, and their starts are not known yet"
        if code is WaitCode.RESOURCES:
            return (
                "unknown: only the first job that cannot start gets a reservation and an "
                "estimate (EASY backfill); this one comes later in the queue"
            )
        return "unknown"
    if at <= now:
        return "at the next scheduling pass"
    return f"{clock_time(at, now)} (in {format_duration(at - now)})"


def cmd_why(client: Client, args: argparse.Namespace) -> int:
    job = client.job(args.job_id)
    if args.json:
        print_json({k: job.wire.get(k) for k in WHY_FIELDS})
        return 0
    print("\n".join(shown(line) for line in describe(job)))  # free text: escaped, cut
    return 0


def queue_order(jobs: Sequence[JobView]) -> list[JobView]:
    """The pending jobs the last pass ranked, in queue order (class, score, submit time, id:
    policy/ordering.py's key), as `queue --priority` lists them."""
    ranked = [
        (j, j.priority_factors)
        for j in jobs
        if j.state is JobState.PENDING and j.priority_factors is not None
    ]
    ranked.sort(key=lambda jf: (-jf[1].klass, -jf[1].score, jf[0].submit_time, jf[0].id))
    return [j for j, _ in ranked]


def print_priorities(jobs: Sequence[JobView]) -> None:
    rows = [
        (
            j.id,
            j.user,
            j.project,
            f"{j.priority_name} ({f.klass})",
            f"{f.fairshare:.3f}",
            f"{f.service:.3f}",
            f"{f.age:.3f}",
            f"{f.size:.3f}",
            f"{f.score:.0f}",
        )
        for j in queue_order(jobs)
        for f in [j.priority_factors]
        if f is not None
    ]
    if not rows:
        print("No pending jobs.")
        return
    print_table(
        ("ID", "USER", "PROJECT", "CLASS", "FAIRSHARE", "SERVICE", "AGE", "SIZE", "SCORE"), rows
    )
