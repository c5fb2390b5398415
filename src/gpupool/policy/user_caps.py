"""Per-user caps inside a project (Slurm's MaxTRESPerUser and MaxJobsPerUser): the most GPUs
one user's running jobs of a project may hold, and the most running jobs one user may have
in it (`Project.max_gpus_per_user`, `Project.max_running_jobs_per_user`; where a project sets
none, the pool's defaults `PolicyConfig.max_gpus_per_user` / `max_running_jobs_per_user`).

The quota book (quota.py) asks `UserCaps.held` for each job before its project's limit: a job
that would take its user past a cap waits with `Quota` (rules USER_GPUS, USER_JOBS), naming
the user and the figures, while a teammate's job of the same project may start. A job asking
for more GPUs than the cap by itself can never start there: `QuotaNeverFits`
(NEVER_USER_GPUS), refused at submit (quota_feasibility.check_quota).

What a user holds counts as everywhere (`QuotaBook.held`: a shared GPU its fraction), from
the snapshot's running jobs, and grows with each start, reclaim claim or preemption claim of
the pass (`took`), so the jobs after it in the pass see it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from gpupool.core.project import Project
from gpupool.policy.quota_feasibility import EPS, caps_of
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.snapshot import PendingJob, PolicyConfig, RunningJob
from gpupool.policy.status import Code, Rule, Status

Key = tuple[str, str]  # (project, user)


def any_caps(projects: Mapping[str, Project], config: PolicyConfig) -> bool:
    """Whether some cap is set: the book exists for them, and its fast path is off."""
    if config.max_gpus_per_user is not None or config.max_running_jobs_per_user is not None:
        return True
    return any(
        p.max_gpus_per_user is not None or p.max_running_jobs_per_user is not None
        for p in projects.values()
    )


class UserCaps:
    """Each (project, user)'s GPUs held and running jobs during one pass."""

    def __init__(
        self,
        projects: Mapping[str, Project],
        config: PolicyConfig,
        running: Iterable[RunningJob],
        held: Callable[[RunningJob], float],
    ) -> None:
        self.projects, self.config = projects, config
        self.gpus: dict[Key, float] = {}
        self.jobs: dict[Key, int] = {}
        seen: set[int] = set()
        for r in running:
            if r.id < 0:  # a drained GPU's holder (policy/drains.py): nobody's
                continue
            key = (r.project, r.user)
            self.gpus[key] = self.gpus.get(key, 0.0) + held(r)
            if r.id not in seen:  # a job spread over nodes has a row per node
                seen.add(r.id)
                self.jobs[key] = self.jobs.get(key, 0) + 1

    def held(self, job: PendingJob, need: float) -> Status | None:
        """`Quota` when starting `job` (asking `need` GPUs) would take its user past a cap of
        its project, `QuotaNeverFits` when its ask alone is over the GPU cap; None: it may."""
        gpu_cap, job_cap = caps_of(self.projects.get(job.project), self.config)
        key = (job.project, job.user)
        if gpu_cap is not None and need > 0:
            if need > gpu_cap + EPS:
                short = Insufficient(None, Dimension.LIMIT, need, gpu_cap, gpu_cap)
                return Status(
                    Code.QUOTA_NEVER_FITS,
                    Rule.NEVER_USER_GPUS,
                    short=short,
                    project=job.project,
                    user=job.user,
                )
            use = self.gpus.get(key, 0.0)
            if use + need > gpu_cap + EPS:
                short = Insufficient(None, Dimension.LIMIT, need, gpu_cap - use, gpu_cap)
                return Status(
                    Code.QUOTA, Rule.USER_GPUS, short=short, project=job.project, user=job.user
                )
        if job_cap is not None and self.jobs.get(key, 0) + 1 > job_cap:
            return Status(
                Code.QUOTA, Rule.USER_JOBS, project=job.project, user=job.user, limit=job_cap
            )
        return None

    def took(self, project: str, user: str, gpus: float) -> None:
        """A job of `user` in `project` starts, or is claimed for, holding `gpus`."""
        key = (project, user)
        self.gpus[key] = self.gpus.get(key, 0.0) + gpus
        self.jobs[key] = self.jobs.get(key, 0) + 1
