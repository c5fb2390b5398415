"""`gpupool sim --trace history`: read the pool's own history from its API (the jobs that
ended, with their times; its GPUs; its projects) and hand it to the replay as plain data
(sim/history.py). Through the API, as every other command reaches the pool: the store stays
the daemon's, and an admin replays a remote pool as a local one (--url, --state-dir).
"""

from __future__ import annotations

from gpupool.client import Client
from gpupool.client.pool_views import GpusView
from gpupool.client.views import JobView
from gpupool.core.hardware import Gpu, Node
from gpupool.core.project import Project
from gpupool.sim.history import EndedJob, history_cluster, history_trace
from gpupool.sim.model import SimBackend, SimCluster, Trace

PAGE = 1000  # jobs per request
_ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT")


def pool_history(client: Client) -> tuple[Trace, SimCluster]:
    """The pool's ended jobs as a trace and its GPUs and projects as the cluster."""
    pool = client.gpus()
    nodes = _nodes(pool)
    projects = {
        p.name: Project(name=p.name, quota=p.quota, limit=p.limit, weight=p.weight)
        for p in client.projects().projects
    }
    jobs = [_ended(j) for j in _ended_jobs(client)]
    cluster = history_cluster(f"the pool at {client.where()}", nodes, projects, _backends(pool))
    return history_trace(jobs, nodes), cluster


def _backends(pool: GpusView) -> dict[str, SimBackend]:
    """Each backend whose nodes its engine reported, as the replay's: its nodes that take
    work (all their GPUs: other tenants are not replayed) and the projects' quotas there."""
    out: dict[str, SimBackend] = {}
    for b in pool.backends:
        nodes = tuple(
            Node(
                name=n.name,
                gpus=tuple(Gpu(i, n.gpu_model or "GPU", n.gpu_memory_bytes) for i in range(n.gpus)),
            )
            for n in b.nodes
            if n.state == "up" and n.gpus > 0
        )
        if nodes:
            out[b.name] = SimBackend(nodes, dict(b.quotas))
    return out


def _ended_jobs(client: Client) -> list[JobView]:
    out: list[JobView] = []
    offset = 0
    while True:
        page = client.job_page(
            include_finished=True, states=_ENDED, limit=PAGE, offset=offset, order="id"
        )
        out.extend(page.jobs)
        offset += len(page.jobs)
        if not page.jobs or offset >= page.total:
            return out


def _ended(j: JobView) -> EndedJob:
    res = j.resources
    return EndedJob(
        id=j.id,
        submit_time=j.submit_time,
        start_time=j.start_time,
        end_time=j.end_time,
        gpus=res.gpus,
        project=j.project,
        user=j.user,
        time_limit_s=j.time_limit_s,
        gpu_memory_bytes=res.gpu_memory_bytes,
        gpu_fraction=res.gpu_fraction,
        backend=j.backend,
        nodes=j.nodes,
    )


def _nodes(pool: GpusView) -> tuple[Node, ...]:
    return tuple(
        Node(
            name=n.name,
            gpus=tuple(Gpu(g.index, g.model, g.memory_bytes) for g in n.gpus),
            links=n.links,
        )
        for n in pool.nodes
    )
