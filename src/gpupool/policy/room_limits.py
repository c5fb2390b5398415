"""A project's CPU and memory limits (`Project.cpu_limit`, `Project.memory_limit_bytes`; Slurm's
GrpTRES=cpu=N,mem=M): the most CPUs and bytes of host memory its running jobs may hold at
once, counted from what they ask (`--cpus`, `--mem`; a job that asks for none holds none, as
every view of the pool counts them).

The quota book (quota.py) asks `RoomLimits.held` for each job, as it asks its GPU limit: a job
that would take its project over a limit waits with `Quota` (rule ROOM_LIMIT, the dimension
and figures in `short`); one asking for more than the limit by itself is `QuotaNeverFits`
(NEVER_ROOM_LIMIT), refused at submit (`never_room`). Each start or claim of the pass adds
its ask (`took`), so the jobs after it see it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.snapshot import PendingJob, RunningJob
from gpupool.policy.status import Code, Rule, Status


def any_room_limits(projects: Mapping[str, Project]) -> bool:
    return any(
        p.cpu_limit is not None or p.memory_limit_bytes is not None for p in projects.values()
    )


def _asks(res: Resources) -> tuple[tuple[Dimension, int], ...]:
    return ((Dimension.CPUS, res.cpus or 0), (Dimension.MEMORY, res.mem_bytes or 0))


def _limit(p: Project | None, dimension: Dimension) -> int | None:
    if p is None:
        return None
    return p.cpu_limit if dimension is Dimension.CPUS else p.memory_limit_bytes


def never_room(res: Resources, name: str, project: Project | None) -> Status | None:
    """`QuotaNeverFits` when the job alone asks for more CPUs or memory than its project's
    limit (submit-time, and in a pass), else None."""
    for dimension, ask in _asks(res):
        limit = _limit(project, dimension)
        if limit is not None and ask > limit:
            short = Insufficient(None, dimension, ask, limit, limit)
            return Status(Code.QUOTA_NEVER_FITS, Rule.NEVER_ROOM_LIMIT, short=short, project=name)
    return None


class RoomLimits:
    """Each project's CPUs and memory held during one pass."""

    def __init__(self, projects: Mapping[str, Project], running: Iterable[RunningJob]) -> None:
        self.projects = projects
        self.used: dict[tuple[str, Dimension], int] = {}
        seen: set[int] = set()
        for r in running:
            if r.id not in seen:  # a job spread over nodes has a row per node
                seen.add(r.id)
                self.took(r.project, r.resources)

    def held(self, job: PendingJob) -> Status | None:
        """`Quota` when starting `job` would take its project over its CPU or memory limit,
        `QuotaNeverFits` when its ask alone is over it; None: it may start."""
        p = self.projects.get(job.project)
        never = never_room(job.resources, job.project, p)
        if never is not None:
            return never
        for dimension, ask in _asks(job.resources):
            limit = _limit(p, dimension)
            if limit is None or ask <= 0:
                continue
            use = self.used.get((job.project, dimension), 0)
            if use + ask > limit:
                short = Insufficient(None, dimension, ask, limit - use, limit)
                return Status(Code.QUOTA, Rule.ROOM_LIMIT, short=short, project=job.project)
        return None

    def took(self, project: str, res: Resources) -> None:
        for dimension, ask in _asks(res):
            if ask:
                key = (project, dimension)
                self.used[key] = self.used.get(key, 0) + ask
