"""Quotas the pool cannot meet, as data: a project's quota above the pool's GPUs (it can
never be met in full), and quotas that add up to more than the pool (not all can be met at
once). Logged by the daemon at start and after every project change, and answered to the
admin who made the change (`POST`/`PATCH /v1/projects`, printed by `gpupool project`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from gpupool.core.project import Project
from gpupool.core.units import plural
from gpupool.core.wire_shapes import QuotaWarningWire


class QuotaProblem(StrEnum):
    PROJECT_ABOVE_POOL = "project_quota_above_pool"  # one project's quota > the pool
    SUM_ABOVE_POOL = "quotas_above_pool"  # the quotas together > the pool


@dataclass(frozen=True)
class QuotaWarning:
    problem: QuotaProblem
    shares: tuple[tuple[str, float], ...]  # (project, quota): the one, or every one with a quota
    pool_gpus: float

    @property
    def projects(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.shares)

    @property
    def quota_gpus(self) -> float:
        """The project's quota, or the quotas' sum."""
        return sum(quota for _, quota in self.shares)

    def text(self) -> str:
        pool = plural(self.pool_gpus, "GPU")
        if self.problem is QuotaProblem.PROJECT_ABOVE_POOL:
            ((name, quota),) = self.shares
            return (
                f"project {name}'s quota of {plural(quota, 'GPU')} exceeds the pool's {pool}: "
                "it can never be met in full"
            )
        shares = ", ".join(f"{name} {quota:g}" for name, quota in self.shares)
        return (
            f"the projects' quotas add up to {plural(self.quota_gpus, 'GPU')}, more than the "
            f"pool's {pool}: not all of them can be met at once ({shares})"
        )

    def to_wire(self) -> QuotaWarningWire:
        return {
            "code": self.problem.value,
            "projects": list(self.projects),
            "quota_gpus": self.quota_gpus,
            "pool_gpus": self.pool_gpus,
            "message": self.text(),
        }


def quota_problems(projects: Iterable[Project], pool_gpus: float) -> list[QuotaWarning]:
    """What is wrong with the quotas of `projects` on a pool of `pool_gpus` GPUs (module
    docstring); empty when all is well. One project above the pool is said once, not also
    as a sum."""
    projects = list(projects)
    out = [
        QuotaWarning(QuotaProblem.PROJECT_ABOVE_POOL, ((p.name, p.quota),), pool_gpus)
        for p in projects
        if p.quota > pool_gpus
    ]
    with_quota = tuple((p.name, p.quota) for p in projects if p.quota > 0)
    if len(with_quota) > 1 and sum(q for _, q in with_quota) > pool_gpus:
        out.append(QuotaWarning(QuotaProblem.SUM_ABOVE_POOL, with_quota, pool_gpus))
    return out
