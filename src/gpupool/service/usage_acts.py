"""Carrying out what the idle-GPU and memory rules decide (monitor/idle.py), once per sample
round, in the GPU monitor's thread, and the words each act leaves in the job's history, its
log and the daemon's log.

- notify / warn: a note in the job's history (state unchanged) and a line in its log;
- stop: a cancel request, as `gpupool cancel` makes (SIGTERM, grace, SIGKILL), its cause
  in the history;
- requeue: the engine preempts it (SIGTERM, grace) and requeues it, as quota reclaim does.
A stop or requeue for idleness is also kept in the store (`record_idle_action`): accounting
counts the GPU-hours it reclaimed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpupool.core.gpu_usage import JobUsageDelta
from gpupool.core.job import Job, JobState
from gpupool.core.units import format_duration, format_size
from gpupool.monitor.idle import Act, ActKind, UsageWatch

if TYPE_CHECKING:
    from gpupool.service.pool_service import PoolService

log = logging.getLogger("gpupool.idle")


def act_text(act: Act) -> str:
    """The act in the words of the job's history and log."""
    idle = f"GPU utilization below {act.threshold_pct:g}% for {format_duration(act.idle_s)}"
    rule = f"project {act.project}'s idle policy"
    used, granted = format_size(act.used_bytes), format_size(act.granted_bytes)
    match act.kind:
        case ActKind.NOTIFY_IDLE:
            if act.instead_of is not None:
                return f"idle: {idle} ({rule}: requeue, but this job is not preemptible)"
            return f"idle: {idle} ({rule}: notify)"
        case ActKind.STOP_IDLE:
            return f"stopped as idle: {idle} ({rule})"
        case ActKind.REQUEUE_IDLE:
            return f"idle: {idle}; requeued to give its GPUs to waiting jobs ({rule})"
        case ActKind.WARN_MEMORY:
            then = (
                f"it is stopped in {format_duration(act.grace_s)} unless it drops back"
                if act.grace_s
                else "the pool only warns"
            )
            return f"uses {used} of GPU memory, more than the {granted} it was granted: {then}"
        case ActKind.STOP_MEMORY:
            return (
                f"stopped: used {used} of GPU memory for over {format_duration(act.grace_s)}, "
                f"more than the {granted} it was granted"
            )


class UsageActions:
    """One sample round's acts, decided and carried out (the GPU monitor's `on_round`)."""

    def __init__(self, service: PoolService, watch: UsageWatch | None = None) -> None:
        self.service = service
        self.watch = watch or UsageWatch()

    def round(self, deltas: Sequence[JobUsageDelta], now: float) -> None:
        jobs = self.service.engine.view(fresh=False).jobs
        waiting = any(j.state is JobState.PENDING for j in jobs.values())
        projects = self.service.projects_by_name()
        for act in self.watch.observe(deltas, now, jobs, projects, waiting):
            self._carry_out(act, jobs[act.job_id], now)

    def _carry_out(self, act: Act, job: Job, now: float) -> None:
        service, text = self.service, act_text(act)
        log.info("job %d: %s", job.id, text)
        self._log_line(job, text)
        if act.kind in (ActKind.NOTIFY_IDLE, ActKind.WARN_MEMORY):
            noted = service.store.note(job.id, now, text, only_if=JobState.RUNNING)
            if noted is not None:
                service.engine.stored(noted)
            return
        if act.kind is ActKind.REQUEUE_IDLE:
            service.engine.preempt(job.id, text, act.hold_s)
        else:
            service.engine.stored(service.store.request_cancel(job.id, now, text))
        if act.kind in (ActKind.STOP_IDLE, ActKind.REQUEUE_IDLE):
            limit = service.engine.time_limit_of(job)
            started = job.start_time if job.start_time is not None else now
            service.store.record_idle_action(job.id, now, act.kind.value, started + limit)

    def _log_line(self, job: Job, text: str) -> None:
        """A line in the job's own log, where its user looks first (appended, never created:
        a job without a log file yet gets none)."""
        path = self.service.log_location(job)
        line = f"\n[gpupool] {text}\n".encode()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            os.write(fd, line)
        except OSError:
            pass
        finally:
            os.close(fd)
