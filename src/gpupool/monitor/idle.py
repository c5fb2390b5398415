"""Idle GPUs and GPU memory overuse: what to do about a job, decided from each sample round
(the GPU monitor's `JobUsageDelta`s), as Run:ai's idle-GPU limits do.

- **Idle**: a job of a project with an `idle_timeout_s` whose GPUs stay below the project's
  `idle_threshold_pct` (mean over its GPUs) for that long. Then the project's `idle_action`
  (once per idle stretch; a project that changes its action acts anew):
  `notify` (a note in its history and a line in its log), `stop`
  (cancelled), or `requeue` (preempted and requeued: only a preemptible job, and only while
  other jobs wait; until then nothing). Without an action the job's class decides:
  interactive jobs are stopped, the others notified. A busy round starts a new stretch.
- **Memory overuse**: a job sharing a GPU (granted part of its memory) whose own processes
  use more than it was granted is warned at once, then stopped after the pool's grace
  unless it drops back (or only warned: `MemoryRule(stop=False)`).

`UsageWatch.observe` only decides (an `Act` is data: a kind and its figures); the service
carries acts out and words them (engine/service_usage.py). Its memory of each job (when it
was last busy, when it went over) is the daemon's: after a restart an idle stretch starts
again, which errs on the side of the job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from gpupool.core.gpu_usage import JobUsageDelta
from gpupool.core.job import PRIORITY_CLASSES, Job, JobState
from gpupool.core.project import IdleAction, Project

DEFAULT_MEMORY_GRACE_S = 60.0


class ActKind(StrEnum):
    NOTIFY_IDLE = "notify_idle"
    STOP_IDLE = "stop_idle"
    REQUEUE_IDLE = "requeue_idle"
    WARN_MEMORY = "warn_memory"
    STOP_MEMORY = "stop_memory"


@dataclass(frozen=True)
class Act:
    """What to do about one job, with the figures its words need."""

    job_id: int
    kind: ActKind
    project: str
    idle_s: float = 0.0  # how long it has been idle (idle acts)
    threshold_pct: float = 0.0
    used_bytes: int = 0  # memory acts: what it uses, what it was granted
    granted_bytes: int = 0
    grace_s: float = 0.0  # memory warnings: when the stop comes (0: warned only)
    instead_of: IdleAction | None = None  # requeue asked of a job that cannot be: notified
    hold_s: float | None = None  # a requeued idle job waits this long (its project's timeout)


@dataclass(frozen=True)
class MemoryRule:
    stop: bool = True  # False: warn only
    grace_s: float = DEFAULT_MEMORY_GRACE_S


@dataclass
class _Watched:
    busy_at: float  # the start of its current idle stretch (its last busy round)
    acted: IdleAction | None = None  # the idle action taken in this stretch
    over_since: float | None = None  # above its granted memory since
    stopped: bool = False  # a stop was asked: nothing more to do about it


@dataclass
class UsageWatch:
    memory: MemoryRule = field(default_factory=MemoryRule)
    _jobs: dict[int, _Watched] = field(default_factory=dict)

    def observe(
        self,
        deltas: Iterable[JobUsageDelta],
        now: float,
        jobs: Mapping[int, Job],
        projects: Mapping[str, Project],
        others_waiting: bool,
    ) -> list[Act]:
        """The acts one round calls for. `jobs`: the pool's jobs by id (only RUNNING ones
        are acted on); `others_waiting`: some job is pending (a requeue frees GPUs for it)."""
        acts: list[Act] = []
        seen: set[int] = set()
        for delta in deltas:
            job = jobs.get(delta.job_id)
            if job is None or job.state is not JobState.RUNNING:
                continue
            seen.add(job.id)
            watched = self._jobs.setdefault(job.id, _Watched(busy_at=now))
            if watched.stopped:
                continue
            act = self._memory(job, delta, watched, now)
            if act is None:
                act = self._idle(job, delta, watched, now, projects, others_waiting)
            if act is not None:
                acts.append(act)
                if act.kind in (ActKind.STOP_IDLE, ActKind.STOP_MEMORY, ActKind.REQUEUE_IDLE):
                    watched.stopped = True
        for gone in set(self._jobs) - seen:
            job = jobs.get(gone)
            if job is None or job.state is not JobState.RUNNING:
                del self._jobs[gone]  # ended, or requeued: a new run starts afresh
        return acts

    def _memory(self, job: Job, delta: JobUsageDelta, watched: _Watched, now: float) -> Act | None:
        granted = job.gpu_memory_bytes
        used = delta.memory_bytes
        if granted is None or used is None or used <= granted:
            watched.over_since = None
            return None
        project = job.spec.project
        if watched.over_since is None:
            watched.over_since = now
            grace = self.memory.grace_s if self.memory.stop else 0.0
            return Act(job.id, ActKind.WARN_MEMORY, project, used_bytes=used,
                       granted_bytes=granted, grace_s=grace)  # fmt: skip
        if self.memory.stop and now - watched.over_since >= self.memory.grace_s:
            return Act(job.id, ActKind.STOP_MEMORY, project, used_bytes=used,
                       granted_bytes=granted, grace_s=self.memory.grace_s)  # fmt: skip
        return None

    def _idle(
        self,
        job: Job,
        delta: JobUsageDelta,
        watched: _Watched,
        now: float,
        projects: Mapping[str, Project],
        others_waiting: bool,
    ) -> Act | None:
        project = projects.get(job.spec.project)
        if project is None or project.idle_timeout_s is None or delta.util_pct is None:
            return None
        threshold = project.idle_threshold_pct
        if delta.util_pct >= threshold:
            watched.busy_at, watched.acted = now, None
            return None
        idle_s = now - watched.busy_at
        if idle_s < project.idle_timeout_s:
            return None
        action = project.idle_action or default_idle_action(job)
        instead_of = None
        if action is IdleAction.REQUEUE and not job.spec.is_preemptible:
            action, instead_of = IdleAction.NOTIFY, IdleAction.REQUEUE
        if watched.acted is action:
            return None  # done in this stretch (a project that changes its action acts anew)
        if action is IdleAction.REQUEUE and not others_waiting:
            return None  # nobody needs its GPUs: ask again next round
        watched.acted = action
        kind = {
            IdleAction.NOTIFY: ActKind.NOTIFY_IDLE,
            IdleAction.STOP: ActKind.STOP_IDLE,
            IdleAction.REQUEUE: ActKind.REQUEUE_IDLE,
        }[action]
        hold = project.idle_timeout_s if kind is ActKind.REQUEUE_IDLE else None
        return Act(job.id, kind, project.name, idle_s=idle_s, threshold_pct=threshold,
                   instead_of=instead_of, hold_s=hold)  # fmt: skip


def default_idle_action(job: Job) -> IdleAction:
    """Interactive jobs (a notebook left open) are stopped; the others only notified."""
    if job.spec.priority >= PRIORITY_CLASSES["interactive"]:
        return IdleAction.STOP
    return IdleAction.NOTIFY
