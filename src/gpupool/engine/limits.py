"""A job's time limit: its own `--time`, else its project's default, else the pool's.

As Slurm gives a job without `--time` its partition's DefaultTime, the pool gives a job
without one a limit when it is submitted: its project's `default_time_limit`, else the
daemon's `--default-time-limit` (24 h unless set). The limit is written into the job's spec,
so `show` shows it, its supervisor stops the job when it is reached (TIMEOUT, after SIGTERM
and the job's grace), and backfill, which plans with every running job's end at its start
plus its limit, plans with the limit that is enforced. The job's history says where the limit
came from (docs/scheduling.md, "Time limits").

Jobs submitted before limits were given at submit (their spec has none) get the same rule
applied when they are scheduled and launched: `effective_time_limit` is the one rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from gpupool.core.job import JobSpec
from gpupool.core.project import Project
from gpupool.core.units import format_duration


class LimitSource(StrEnum):
    JOB = "job"  # its own --time
    PROJECT = "project"  # its project's default_time_limit
    POOL = "pool"  # the daemon's --default-time-limit


@dataclass(frozen=True)
class TimeLimit:
    seconds: float
    source: LimitSource

    def text(self, project: str) -> str:
        """'time limit 2h00m (its own --time)', '... (project vision's default: no --time)'."""
        head = f"time limit {format_duration(self.seconds)}"
        if self.source is LimitSource.JOB:
            return f"{head} (its own --time)"
        if self.source is LimitSource.PROJECT:
            return f"{head} (project {project}'s default: no --time)"
        return f"{head} (the pool's default: no --time)"


def effective_time_limit(
    spec: JobSpec, projects: Mapping[str, Project], pool_default_s: float
) -> TimeLimit:
    """The limit a job runs under (module docstring)."""
    if spec.time_limit_s:
        return TimeLimit(spec.time_limit_s, LimitSource.JOB)
    project = projects.get(spec.project)
    if project is not None and project.default_time_limit_s:
        return TimeLimit(project.default_time_limit_s, LimitSource.PROJECT)
    return TimeLimit(pool_default_s, LimitSource.POOL)
