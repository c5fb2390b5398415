"""A replay of the pool's own machine with backends beside it (SimCluster.backends), decided
as the daemon decides them (engine/admission.py): after the pool's own pass, one pass per
backend over its nodes, its jobs and the projects with their quota on that backend, with
the pool's fair-share usage and its config (wide jobs spread over nodes, as there).

What the daemon knows of a backend that a replay has not: other tenants (none here), and
the engine's own delay between admission and start (none here: an admitted job starts at
once). A gang is replayed as its GPUs in all, spread over nodes by the pass (the daemon
then seats it K GPUs on each of its N nodes). That the replay and the daemon decide alike
on the same jobs is tests/unit/test_same_decisions_backends.py's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from gpupool.core.project import Project
from gpupool.policy.decide import decide
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.snapshot import Decision, PendingJob, PolicyConfig, RunningJob, Snapshot, Usage
from gpupool.sim.model import SimBackend, SimCluster, TraceJob


def backend_projects(projects: Mapping[str, Project], backend: SimBackend) -> dict[str, Project]:
    """The projects as a backend's pass reads them: each with its quota there."""
    return {name: replace(p, quota=backend.quotas.get(name, 0.0)) for name, p in projects.items()}


def runs_there(tj: TraceJob, cluster: SimCluster) -> bool:
    """Whether a job could ever run where it is to run (its backend's nodes, else the pool's
    own): what the daemon refuses, or never admits, is not replayed."""
    if tj.backend is None:
        return True  # the replay's own check (engine.py) covers the pool's machine
    backend = cluster.backends.get(tj.backend)
    if backend is None:
        return False
    from gpupool.sim.engine import trace_spec  # engine.py imports this module

    # Spread: a backend's job wider than its every node is a gang (TraceJob keeps its GPUs
    # in all), which the backend's pass spreads over nodes.
    return check_satisfiable(trace_spec(tj).resources, backend.nodes, spread=True) is None


def backend_passes(
    cluster: SimCluster,
    projects: Mapping[str, Project],
    config: PolicyConfig,
    pending: Iterable[PendingJob],
    running: Iterable[RunningJob],
    where: Mapping[int, str | None],
    usage: Usage,
    now: float,
) -> list[Decision]:
    """Each backend's pass (module docstring); `where`: each job's backend (None: the pool's
    own machine); `pending` and `running` in id order, every domain's together."""
    waiting: dict[str, list[PendingJob]] = {}
    for p in pending:
        b = where[p.id]
        if b is not None:
            waiting.setdefault(b, []).append(p)
    held: dict[str, list[RunningJob]] = {}
    for r in running:
        b = where[r.id]
        if b is not None:
            held.setdefault(b, []).append(r)
    out: list[Decision] = []
    spread = replace(config, spread_wide_jobs=True)
    for name in sorted(waiting):
        backend = cluster.backends[name]
        snapshot = Snapshot(
            backend.nodes,
            tuple(waiting[name]),
            tuple(held.get(name, ())),
            0,
            config=spread,
            usage=usage,
            projects=backend_projects(projects, backend),
        )
        out.append(decide(snapshot, now))
    return out
