"""A pool with a backend beside its own machine: the replay (sim/domains.py) and the
daemon's engine (engine/admission.py) decide alike on the same jobs.

As tests/unit/test_same_decisions.py, with half the jobs sent to backend `hpc` (two nodes
of four GPUs, its own quotas), whose engine is played on the engine's clock: a run pinned
to a node starts at its launch and ends `duration` later, or at once when preempted. What
is compared is every start (time, job, node; a backend's GPU indices are its engine's, not
the pool's) and every preemption (time, job).
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

import pytest
from test_same_decisions import (
    DAEMON,
    NO_FAIR_SHARE,
    QUOTAS,
    Act,
    ClockExecutor,
    _jobs,
    _out_of_order,
    _replayed,
    _Run,
)

from gpupool.core.backends import BackendAdmission, BackendHealth, BackendKind, Capacity, EngineNode
from gpupool.core.clock import FakeClock
from gpupool.core.execution import Capabilities, Handle, LaunchRequest, Observation
from gpupool.core.hardware import Inventory
from gpupool.core.job import JobSpec, Resources
from gpupool.engine import Engine
from gpupool.engine.events import CapacityRead
from gpupool.policy.snapshot import PolicyConfig
from gpupool.sim.clusters import uniform_cluster
from gpupool.sim.model import SimBackend, SimCluster, Trace
from gpupool.store import Store

HPC_QUOTAS = {"vision": 4.0, "nlp": 2.0}


def _trace(seed: int) -> Trace:
    """The job set of test_same_decisions, every other job (by a seeded draw) on `hpc`."""
    rng = random.Random(seed * 7 + 1)
    jobs = tuple(
        replace(tj, backend="hpc" if rng.random() < 0.5 else None) for tj in _jobs(seed=seed).jobs
    )
    return Trace(jobs, "mixed")


def _cluster() -> SimCluster:
    box = uniform_cluster(2, 4, model="A100-80GB")
    hpc = uniform_cluster(2, 4, model="A100-80GB")
    nodes = tuple(replace(n, name=f"hpc/{n.name}") for n in hpc.nodes)
    backend = SimBackend(nodes, HPC_QUOTAS)
    return SimCluster(box.name, box.nodes, {p.name: p for p in QUOTAS}, {"hpc": backend})


class ClockBackend(ClockExecutor):
    """The backend `hpc` on the engine's clock: its nodes as `capacity`, a run started where
    it is pinned when launched (nothing else holds its GPUs)."""

    name = "hpc"
    kind = BackendKind.SLURM

    def __init__(self, clock: FakeClock, durations: dict[int, float], cluster: SimCluster) -> None:
        super().__init__(clock, durations)
        nodes = cluster.backends["hpc"].nodes
        self.nodes = tuple(EngineNode(n.name[4:], len(n.gpus), pin=n.name[4:]) for n in nodes)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(multi_node=True, adopts_after_restart=True)

    def health(self) -> BackendHealth:
        return BackendHealth(True, "played")

    def capacity(self) -> Capacity:
        return Capacity(self.nodes)

    def launch(self, request: LaunchRequest) -> None:
        handle, now = request.handle, self.clock.now()
        if handle in self.runs:
            return
        assert request.backend is not None and request.backend.pinned
        self.runs[handle] = _Run(now, now + self.durations[handle.job_id])
        where = tuple((f"hpc/{pin}", ()) for pin in request.backend.pinned)
        self.acts.append((now, "start", handle.job_id, where))  # type: ignore[arg-type]

    def adopt(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        return self.poll(handles)


def _engine_ran(trace: Trace, cluster: SimCluster, config: PolicyConfig, tmp: Path) -> list[Act]:
    clock = FakeClock(0.0)
    durations = {tj.id: tj.duration_s for tj in trace.jobs}
    executor, backend = ClockExecutor(clock, durations), ClockBackend(clock, durations, cluster)
    store = Store.open(f"sqlite:///{tmp / 'state' / 'state.db'}")
    try:
        for project in cluster.projects.values():
            store.create_project(project)
        engine = Engine(
            store,
            executor,
            Inventory(cluster.nodes, source="declared"),
            clock=clock,
            config=config,
            usage_refresh_s=0,
            backends={"hpc": backend},  # type: ignore[dict-item]
            admission={"hpc": BackendAdmission(quotas=HPC_QUOTAS)},
        )
        engine.recover()
        engine.post(CapacityRead("hpc", backend.capacity()))
        arrivals = list(trace.jobs)
        while arrivals or min(executor.next_end(), backend.next_end()) < math.inf:
            now = min(
                arrivals[0].submit_s if arrivals else math.inf,
                executor.next_end(),
                backend.next_end(),
            )
            clock.set(now)
            while arrivals and arrivals[0].submit_s <= now:
                tj = arrivals.pop(0)
                spec = JobSpec(
                    command=("train",),
                    resources=Resources(gpus=tj.gpus),
                    project=tj.project,
                    time_limit_s=tj.time_limit_s,
                    workdir="/",
                    backend=tj.backend,
                )
                job = store.submit(spec, tj.user, now)
                assert job.id == tj.id
                engine.stored(job)
            engine.run_pass()
            for _ in range(64):  # admitted runs seen started, victims requeued: decide again
                engine.run_pass()
                if not (executor.unseen_stops or backend.unseen_stops):
                    break
            engine.run_pass()
            assert not (executor.unseen_stops or backend.unseen_stops)
        assert all(j.state.terminal for j in store.list_jobs(include_finished=True))
    finally:
        store.close()
    return executor.acts + backend.acts


def _nodes_only(acts: list[Act]) -> list[Act]:
    """A backend's starts by node only: its GPU indices are its engine's."""
    return [
        (t, kind, job, tuple((n, () if n.startswith("hpc/") else g) for n, g in where))
        for t, kind, job, where in acts
    ]


@pytest.mark.parametrize(("seed", "config"), [(31, NO_FAIR_SHARE), (4, DAEMON), (9, DAEMON)])
def test_a_pool_with_a_backend_is_replayed_as_the_daemon_decides(
    seed: int, config: PolicyConfig, tmp_path: Path
) -> None:
    trace, cluster = _trace(seed), _cluster()
    replayed = _nodes_only(_replayed(trace, cluster, config))
    ran = _nodes_only(_engine_ran(trace, cluster, config, tmp_path))
    assert sorted(ran) == sorted(replayed)
    on_hpc = {
        job for _, kind, job, where in ran if kind == "start" and where[0][0].startswith("hpc/")
    }
    assert on_hpc and len(on_hpc) < len(trace.jobs)  # both places had work
    assert len({job for _, kind, job, _ in ran if kind == "start"}) == len(trace.jobs)
    assert _out_of_order(replayed)
