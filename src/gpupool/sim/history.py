"""`gpupool sim --trace history`: the pool's own job history as a trace, its own GPUs as the
cluster and its own projects as the quotas, so an admin replays what the team ran under any
profile (what pooling, a policy change or another GPU would have done).

Plain data in, plain data out: the CLI reads the jobs, GPUs and projects from the pool's API
(cli/sim_history.py) and hands them here as `EndedJob`s, nodes and projects.

A job of the history is replayed as it last ran: submitted when it was, asking what it asked
(whole GPUs, or a shared GPU's memory: a `gpu_fraction` becomes that fraction of the largest
GPU's memory), in its project, as its user, with its own --time, and running as long as its
last run took (end - start; a requeued job's earlier runs are not replayed, the work they
lost being the pool's history, not the job's need), where it ran (the pool's own machine
or a backend; a gang over N nodes as its GPUs in all, which the replay spreads over nodes).
Jobs that never ran (cancelled while waiting), have not ended, or held no GPU are left out,
counted in `Trace.skipped`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpupool.core.hardware import Node
from gpupool.core.project import Project
from gpupool.policy.node_facts import NodeFacts
from gpupool.sim.model import SimBackend, SimCluster, Trace, TraceJob

HISTORY = "history"  # the --trace value
NEVER_RAN = "never ran"
NOT_ENDED = "not ended"
NO_GPUS = "no GPUs"


@dataclass(frozen=True)
class EndedJob:
    """One job of the pool's history, as the API gives it (times in epoch seconds)."""

    id: int
    submit_time: float
    start_time: float | None
    end_time: float | None
    gpus: int
    project: str
    user: str
    time_limit_s: float | None = None
    gpu_memory_bytes: int | None = None
    gpu_fraction: float | None = None
    backend: str | None = None  # where it ran: None, the pool's own machine
    nodes: int = 1  # a gang's nodes (GPUs per node in `gpus`)


def history_trace(jobs: Iterable[EndedJob], nodes: tuple[Node, ...]) -> Trace:
    """The jobs that ran and ended, as a trace from the first one's submission (module
    docstring); the others counted in `skipped`."""
    largest = NodeFacts.of(nodes).largest_gpu_memory
    kept: list[EndedJob] = []
    skipped: dict[str, int] = {}
    for job in jobs:
        if job.end_time is None:
            skipped[NOT_ENDED] = skipped.get(NOT_ENDED, 0) + 1
        elif job.start_time is None:
            skipped[NEVER_RAN] = skipped.get(NEVER_RAN, 0) + 1
        elif job.gpus <= 0 and job.gpu_memory_bytes is None and job.gpu_fraction is None:
            skipped[NO_GPUS] = skipped.get(NO_GPUS, 0) + 1
        else:
            kept.append(job)
    kept.sort(key=lambda j: (j.submit_time, j.id))
    origin = kept[0].submit_time if kept else 0.0
    out = []
    for job in kept:
        assert job.start_time is not None and job.end_time is not None
        memory = job.gpu_memory_bytes
        if memory is None and job.gpu_fraction is not None and largest:
            memory = max(1, int(job.gpu_fraction * largest))
        out.append(
            TraceJob(
                id=job.id,
                submit_s=job.submit_time - origin,
                duration_s=max(0.0, job.end_time - job.start_time),
                gpus=max(1, job.gpus) if memory is not None else job.gpus * job.nodes,
                user=job.user,
                project=job.project,
                time_limit_s=job.time_limit_s,
                gpu_memory_bytes=memory,
                backend=job.backend,
            )
        )
    return Trace(tuple(out), HISTORY, skipped)


def history_cluster(
    name: str,
    nodes: tuple[Node, ...],
    projects: Mapping[str, Project],
    backends: Mapping[str, SimBackend] | None = None,
) -> SimCluster:
    """The pool's own nodes and projects (quotas, limits, weights) as the replay's cluster,
    with its backends' nodes as their engines last reported them and the projects' quotas
    there (sim/domains.py decides them as the daemon does)."""
    return SimCluster(
        name=name, nodes=nodes, projects=dict(projects), backends=dict(backends or {})
    )
