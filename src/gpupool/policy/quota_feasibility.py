"""Requests their project's quota or limit can never let start (the rules of `quota.py`).

Two of quota.py's rules hold a job back whatever else runs:

- **Limit**: a project never holds more than its `limit`; a job asking for more than the
  limit by itself can never start there, preemptible or not.
- **Borrowing needs --preemptible**: while quotas are in force (some project has a quota
  above 0), a non-preemptible job (`--no-preemptible`, or `--priority interactive` without
  `--preemptible`) runs only within its project's quota; one asking for more than that quota
  by itself, in a project with no quota above all, can never start.

GPUs are counted as everywhere (`core.job.gpu_count`; a GPU-memory request over the largest
GPU in the pool, as the quota book counts a pending job). `check_quota` refuses such a
request at submit (the API's 422, exit 2 in the CLI); a pass (`QuotaBook.admit`) gives a job
that became one after quotas changed the code `QuotaNeverFits` instead of `Quota`, with what
to change: it stays pending, as Slurm keeps a job a limit blocks pending with the limit as
its reason, and starts once the quota or limit allows it (docs/scheduling.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpupool.core.hardware import Node
from gpupool.core.job import PRIORITY_CLASSES, Resources, gpu_count
from gpupool.core.project import Project
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.room_limits import never_room
from gpupool.policy.snapshot import PolicyConfig
from gpupool.policy.status import Code, Rule, Status

EPS = 1e-9  # sums of fractions are not exact


def quotas_in_force(projects: Mapping[str, Project]) -> tuple[bool, bool]:
    """(some project has a quota above 0, some project has a limit): the quota book exists
    only when one holds (`QuotaBook.of`), and guarantees only with the first."""
    values = projects.values()
    return any(p.quota > 0 for p in values), any(p.limit is not None for p in values)


def caps_of(
    project: Project | None, config: PolicyConfig | None
) -> tuple[float | None, int | None]:
    """(GPUs, running jobs) one user may have in `project` (policy/user_caps.py): its own,
    else the pool's (`config`; None: no pool default)."""
    gpus = None if project is None else project.max_gpus_per_user
    jobs = None if project is None else project.max_running_jobs_per_user
    if gpus is None and config is not None:
        gpus = config.max_gpus_per_user
    if jobs is None and config is not None:
        jobs = config.max_running_jobs_per_user
    return gpus, jobs


def never_fits(
    need: float,
    preemptible: bool,
    priority: int,
    name: str,
    project: Project | None,
    guarantees: bool,
) -> Status | None:
    """`QuotaNeverFits` if a job asking for `need` GPUs can never start in project `name`
    (module docstring), saying what to change; None if it can some day. `project`: its
    settings (None: a project not configured, quota 0 and no limit); `guarantees`: quotas
    are in force (some project has a quota above 0)."""
    limit, quota = (None, 0.0) if project is None else (project.limit, project.quota)
    if limit is not None and need > limit + EPS:
        short = Insufficient(None, Dimension.LIMIT, need, limit, limit)
        return Status(Code.QUOTA_NEVER_FITS, Rule.NEVER_LIMIT, short=short, project=name)
    if not guarantees or preemptible or need <= quota + EPS:
        return None
    interactive = priority >= PRIORITY_CLASSES["interactive"]
    rule = Rule.NEVER_QUOTA_INTERACTIVE if interactive else Rule.NEVER_QUOTA
    short = Insufficient(None, Dimension.QUOTA, need, quota, quota)
    return Status(Code.QUOTA_NEVER_FITS, rule, short=short, project=name)


def check_quota(
    res: Resources,
    preemptible: bool,
    priority: int,
    project: str,
    projects: Mapping[str, Project],
    nodes: tuple[Node, ...],
    config: PolicyConfig | None = None,
) -> Status | None:
    """Submit-time: None if this job could start in `project` some day with the projects'
    quotas, limits and per-user caps (`config`: the pool's defaults of those) as they are,
    else `QuotaNeverFits` (`never_fits`, or more GPUs than one user may hold there). A
    project missing from `projects` has quota 0 and no limit, as in a pass."""
    roomless = never_room(res, project, projects.get(project))
    if roomless is not None:
        return roomless
    need = gpu_count(res, gpu_memory_bytes=NodeFacts.of(nodes).largest_gpu_memory)
    if need <= 0:
        return None
    cap, _ = caps_of(projects.get(project), config)
    if cap is not None and need > cap + EPS:
        short = Insufficient(None, Dimension.LIMIT, need, cap, cap)
        return Status(Code.QUOTA_NEVER_FITS, Rule.NEVER_USER_GPUS, short=short, project=project)
    guarantees, limits = quotas_in_force(projects)
    if not (guarantees or limits):
        return None
    return never_fits(need, preemptible, priority, project, projects.get(project), guarantees)
