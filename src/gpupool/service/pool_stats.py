"""The pool's figures at one moment, from one published view of the engine (engine/view.py),
the GPUs' latest samples and the projects as the service keeps them: per GPU what is
allocated and what is used, per running job the same and its CPU time and memory, per
project quota, use and queue.
What `/metrics` exports (api/metrics.py), and what any other reader of these figures can
take, so each figure has one definition.

Built in memory on each call, never from the store: O(active jobs + GPUs), for a scrape
every few seconds of a queue of 10,000 (docs/benchmarks.md); a running job's CPU time and
memory are a few small files of its cgroup, read as asked.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field

from gpupool.core.cgroup_usage import CgroupUsage
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job
from gpupool.core.monitoring import GpuSample
from gpupool.core.project import Project
from gpupool.engine.gpu_counts import GpuCounter


@dataclass(frozen=True)
class GpuStats:
    node: str
    index: int
    model: str
    memory_total_bytes: int  # the inventory's figure: known with or without a sample
    allocated: float  # held by running jobs: 1 for a whole-GPU job, else its sharers' fractions
    sample: GpuSample | None  # its latest sample; None: not sampled (yet, or sampling off)
    drained: bool = False  # an admin drained it: no job starts there (core/drain.py)


@dataclass(frozen=True)
class RunningJobStats:
    job_id: int
    user: str
    project: str
    name: str  # the name it was given (`--name`), "" without one; never its command
    gpus: float  # the GPUs it holds (GpuCounter: a fraction for a shared GPU)
    # The mean utilization of its GPUs in their latest samples, 0-100 (the whole GPU's:
    # sharers of a GPU each see all of its use); None: none of its GPUs has one.
    utilization_pct: float | None
    # Its CPU time and memory, read from its cgroup now (service/live_usage.py); None:
    # nothing counts them (a backend's job, a daemon without cgroups).
    cgroup_usage: CgroupUsage | None = None


@dataclass(frozen=True)
class ProjectStats:
    name: str
    quota: float  # GPUs guaranteed
    limit: float | None  # the most GPUs its jobs may hold; None: no limit
    in_use_gpus: float  # held by its running jobs
    borrowed_gpus: float  # of those, above its quota (`borrowed`)
    running_jobs: int
    pending_jobs: int
    pending_gpus: float  # asked for by its pending jobs


@dataclass(frozen=True)
class PoolStats:
    gpus: tuple[GpuStats, ...]
    running: tuple[RunningJobStats, ...]
    projects: tuple[ProjectStats, ...]
    running_jobs: int
    pending_jobs: int
    # GPU-seconds idle while a job that could use them waited, by cause, over the pool's
    # life, kept in the store across restarts (engine/idle_waiting.py; the rule:
    # policy/idle_waiting.py).
    idle_waiting_gpu_s: Mapping[str, float] = field(default_factory=dict)


def borrowed(in_use: float, quota: float, quotas_in_force: bool) -> float:
    """The GPUs a project holds above its quota. Quotas are in force only when some project
    has a quota above 0 (policy/quota.py): with none, nothing is guaranteed, and so nothing
    is borrowed either."""
    return max(0.0, in_use - quota) if quotas_in_force else 0.0


def project_stats(
    projects: Mapping[str, Project], usage: Mapping[str, Mapping[str, float]]
) -> tuple[ProjectStats, ...]:
    """Each project's figures, by name: those the pool has, and any other its active jobs
    still name (quota 0, no limit: what the policy gives a project it does not know).
    `usage`: PoolService.project_usage's, the figures `/v1/projects` serves."""
    in_force = any(p.quota > 0 for p in projects.values())
    found = []
    for name in sorted(set(projects) | set(usage)):
        project = projects.get(name)
        quota = project.quota if project is not None else 0.0
        used = usage.get(name, {})
        in_use = used.get("in_use_gpus", 0.0)
        found.append(
            ProjectStats(
                name=name,
                quota=quota,
                limit=project.limit if project is not None else None,
                in_use_gpus=in_use,
                borrowed_gpus=borrowed(in_use, quota, in_force),
                running_jobs=int(used.get("running_jobs", 0)),
                pending_jobs=int(used.get("pending_jobs", 0)),
                pending_gpus=used.get("pending_gpus", 0.0),
            )
        )
    return tuple(found)


def gpu_holders(running: Iterable[Job]) -> dict[tuple[str, int], list[Job]]:
    """The running jobs on each (node, GPU), by id: one whole-GPU job, or fractional
    sharers. `running`: running jobs (any order)."""
    holders: dict[tuple[str, int], list[Job]] = {}
    for job in sorted(running, key=_by_id):
        if job.node is not None:
            for index in job.gpus:
                holders.setdefault((job.node, index), []).append(job)
    return holders


def gpu_stats(
    inventory: Inventory,
    holders: Mapping[tuple[str, int], list[Job]],
    samples: Mapping[tuple[str, int], GpuSample],
    counter: GpuCounter,
    drained: Container[tuple[str, int]] = (),
) -> tuple[GpuStats, ...]:
    """Each GPU of the inventory, in its order. `holders`: `gpu_holders`'."""
    found = []
    for node in inventory.nodes:
        for gpu in node.gpus:
            key = (node.name, gpu.index)
            held = sum(_share_of_each_gpu(job, counter) for job in holders.get(key, ()))
            found.append(
                GpuStats(
                    node.name,
                    gpu.index,
                    gpu.model,
                    gpu.memory_bytes,
                    held,
                    samples.get(key),
                    key in drained,
                )
            )
    return tuple(found)


def running_job_stats(
    running: Iterable[Job],
    samples: Mapping[tuple[str, int], GpuSample],
    counter: GpuCounter,
    cgroup_usage_of: Callable[[Job], CgroupUsage | None] = lambda job: None,
) -> tuple[RunningJobStats, ...]:
    """Each of the `running` jobs, by id; `cgroup_usage_of`: a running job's CPU time and
    memory now (`live_cgroup_usage`; by default none)."""
    found = []
    for job in sorted(running, key=_by_id):
        utils = [
            sample.utilization_pct
            for index in job.gpus
            if (sample := samples.get((job.node or "", index))) is not None
            and sample.utilization_pct is not None
        ]
        found.append(
            RunningJobStats(
                job_id=job.id,
                user=job.user,
                project=job.spec.project,
                name=job.spec.name or "",
                gpus=counter.of(job),
                utilization_pct=sum(utils) / len(utils) if utils else None,
                cgroup_usage=cgroup_usage_of(job),
            )
        )
    return tuple(found)


def _share_of_each_gpu(job: Job, counter: GpuCounter) -> float:
    """What a running job holds of each of its GPUs: 1 for a whole-GPU job, its fraction
    for a shared one (the GPUs it counts for, spread over those it holds)."""
    return counter.of(job) / len(job.gpus) if job.gpus else 0.0


def _by_id(job: Job) -> int:
    return job.id
