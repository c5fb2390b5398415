"""The `static` profile's projects: each project its quota as dedicated GPUs, nothing lent
(`PolicyConfig.lend_idle` off; policy/profiles.py). What pooling is compared with.

Static partitioning is expressed in the quota book's own terms, so the pass needs nothing new:
- a project with a quota above 0 gets a **limit equal to its quota** (a limit is never below
  the quota, so this only lowers it): it never holds more, so it never borrows, and nobody borrows its GPUs either, since
  every other job is held by its own limit first;
- the projects without a quota share the **remainder**, the pool's GPUs no quota names, as one
  project `SHARED` with that remainder as its quota and its limit. Their jobs are booked to
  it (`booked_project`): a team without GPUs of its own queues on the unassigned ones, as on a
  static cluster's shared partition. Where the quotas name every GPU (Philly's VCs), the
  remainder is 0 and such jobs can never run (`QuotaNeverFits`: refused at submit).
- Quotas that add up to more than the pool are kept as they are (each still its limit): the
  projects then compete for GPUs none of them can exceed its quota on.

Only the trace replay runs it (sim/engine.py books its jobs so); the daemon lends idle GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpupool.core.project import Project

# The project the jobs of projects without a quota are booked to (a valid project name that
# no real project is expected to take: `_` first).
SHARED = "_shared"


def dedicated_projects(projects: Mapping[str, Project], capacity: float) -> dict[str, Project]:
    """`projects` as static partitions of a pool of `capacity` GPUs (module docstring): every
    project with a quota limited to it, and `SHARED` with the remainder."""
    out: dict[str, Project] = {}
    assigned = 0.0
    for name, p in projects.items():
        if p.quota <= 0:
            continue
        out[name] = Project(name=name, quota=p.quota, limit=p.quota, weight=p.weight)
        assigned += p.quota
    remainder = float(max(0.0, capacity - assigned))
    out[SHARED] = Project(name=SHARED, quota=remainder, limit=remainder)
    return out


def booked_project(name: str, dedicated: Mapping[str, Project]) -> str:
    """The project a job of `name` is booked to under `dedicated_projects`: its own if it has
    dedicated GPUs, else `SHARED`."""
    return name if name in dedicated and name != SHARED else SHARED
