"""One-line builders for policy tests: GPUs, links, nodes, running and pending jobs.

Shared by test_policy.py and test_policy_properties.py (pytest puts this folder on sys.path).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations

from gpupool.core.hardware import Gpu, Link, LinkKind, Node
from gpupool.core.job import DEFAULT_PRIORITY, Resources
from gpupool.policy import PendingJob, RunningJob

GiB = 1 << 30
A100 = "A100-80GB"
H100 = "NVIDIA H100 80GB HBM3"


def gpus(count: int, model: str = A100) -> tuple[Gpu, ...]:
    return tuple(Gpu(index=i, model=model, memory_bytes=80 * GiB) for i in range(count))


def mixed_gpus(*models: str) -> tuple[Gpu, ...]:
    """GPU i has models[i]."""
    return tuple(Gpu(index=i, model=m, memory_bytes=80 * GiB) for i, m in enumerate(models))


def islands(*groups: Sequence[int]) -> tuple[Link, ...]:
    """NVLink between every pair inside each group, SYS between groups (declared)."""
    members = sorted(g for group in groups for g in group)
    island_of = {g: n for n, group in enumerate(groups) for g in group}
    return tuple(
        Link(a, b, LinkKind.NVLINK if island_of[a] == island_of[b] else LinkKind.SYS)
        for a, b in combinations(members, 2)
    )


def mesh(kind: LinkKind, members: Iterable[int]) -> tuple[Link, ...]:
    """`kind` between every pair of `members`; pairs left undeclared count as SYS."""
    return tuple(Link(a, b, kind) for a, b in combinations(sorted(members), 2))


def node(
    name: str,
    count: int = 8,
    model: str = A100,
    *,
    links: Iterable[Link] = (),
    cpus: int = 0,
    mem_gb: int = 0,
    gpu_list: tuple[Gpu, ...] | None = None,
) -> Node:
    return Node(
        name=name,
        gpus=gpu_list if gpu_list is not None else gpus(count, model),
        links=tuple(links),
        cpus=cpus,
        memory_bytes=mem_gb * GiB,
    )


def demo_node(name: str = "gpu0", *, cpus: int = 0, mem_gb: int = 0) -> Node:
    """The demo box: 8 GPUs, NVLink islands {0,1,2,3} and {4,5,6,7}, SYS across islands."""
    return node(name, 8, links=islands(range(4), range(4, 8)), cpus=cpus, mem_gb=mem_gb)


def res(
    gpus: int = 0,
    gpu_type: str | None = None,
    cpus: int | None = None,
    mem_gb: int | None = None,
) -> Resources:
    return Resources(
        gpus=gpus,
        gpu_type=gpu_type,
        cpus=cpus,
        mem_bytes=None if mem_gb is None else mem_gb * GiB,
    )


def pending(
    job_id: int,
    gpus: int = 0,
    *,
    prio: int = DEFAULT_PRIORITY,
    t: float | None = None,
    gpu_type: str | None = None,
    cpus: int | None = None,
    mem_gb: int | None = None,
) -> PendingJob:
    """A pending job; submitted at time `job_id` unless `t` says otherwise."""
    return PendingJob(
        id=job_id,
        resources=res(gpus, gpu_type, cpus, mem_gb),
        priority=prio,
        submit_time=float(job_id) if t is None else t,
    )


def running(
    job_id: int,
    node_name: str,
    gpu_indices: Sequence[int] = (),
    *,
    cpus: int | None = None,
    mem_gb: int | None = None,
    gpu_type: str | None = None,
) -> RunningJob:
    return RunningJob(
        id=job_id,
        node=node_name,
        gpus=tuple(gpu_indices),
        resources=res(len(gpu_indices), gpu_type, cpus, mem_gb),
        start_time=0.0,
    )
