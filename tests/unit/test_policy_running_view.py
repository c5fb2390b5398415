"""The running view a replay keeps between passes (policy/running_view.py) agrees with a
fresh count of the running jobs after any sequence of starts and stops, a pass never writes
to it, and a pass that uses it decides exactly as one that counts afresh."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import node

from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy.backfill import FreeIndex
from gpupool.policy.decide import decide
from gpupool.policy.placement import Placement
from gpupool.policy.profiles import profile
from gpupool.policy.running_view import RunningView
from gpupool.policy.snapshot import PendingJob, PolicyConfig, RunningJob, Snapshot
from gpupool.sim.clusters import uniform_cluster
from gpupool.sim.engine import SimOptions, replay
from gpupool.sim.model import SimCluster, Trace, TraceJob
from gpupool.sim.run import SIM_BASE

CONFIG = PolicyConfig(spread_wide_jobs=True)
PROJECTS = {"a": Project("a", quota=6), "b": Project("b", quota=4), "c": Project("c", limit=10)}


def _nodes(rng: random.Random) -> tuple:  # type: ignore[type-arg]
    declares = rng.random() < 0.5  # CPUs and memory counted only where a node declares them
    return tuple(
        node(f"n{i}", rng.choice([4, 8]), cpus=64 if declares else 0, mem_gb=256 if declares else 0)
        for i in range(rng.randint(2, 4))
    )


def _piece(rng: random.Random, job_id: int, view: RunningView) -> RunningJob | None:
    """A job piece on what the view says is free."""
    free = rng.choice(view.frees)
    if not free.gpus:
        return None
    if rng.random() < 0.1:  # a fractional job, on a GPU of its own
        gpus = (rng.choice(sorted(free.gpus)),)
        resources = Resources(gpus=1, gpu_memory_bytes=10 * 2**30)
    else:
        gpus = tuple(sorted(rng.sample(sorted(free.gpus), rng.randint(1, len(free.gpus)))))
        resources = Resources(gpus=len(gpus), cpus=rng.choice([None, 4]))
    return RunningJob(
        id=job_id,
        node=free.node.name,
        gpus=gpus,
        resources=resources,
        start_time=float(rng.randint(0, 500)),
        project=rng.choice("abcd"),
        time_limit_s=rng.choice([None, 300.0, 3600.0]),
        gpu_memory_bytes=resources.gpu_memory_bytes,
    )


def _queue(rng: random.Random) -> tuple[PendingJob, ...]:
    return tuple(
        PendingJob(
            id=1000 + i,
            resources=Resources(gpus=rng.choice([1, 2, 4, 8, 12])),
            priority=200,
            submit_time=float(i),
            project=rng.choice("abcd"),
            time_limit_s=rng.choice([None, 600.0, 7200.0]),
        )
        for i in range(rng.randint(0, 12))
    )


def _same_decision(snapshot: Snapshot, now: float) -> None:
    used, counted = decide(snapshot, now), decide(replace(snapshot, running_view=None), now)
    assert used.starts == counted.starts
    assert used.preemptions == counted.preemptions
    assert dict(used.pending) == dict(counted.pending)
    assert used.reservations == counted.reservations
    assert dict(used.estimated_start) == dict(counted.estimated_start)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_view_matches_a_fresh_count_and_decides_the_same(seed: int) -> None:
    rng = random.Random(seed)
    nodes = _nodes(rng)
    view = RunningView(nodes, CONFIG.default_time_limit_s)
    live: list[RunningJob] = []
    for step in range(40):
        if live and rng.random() < 0.4:
            view.remove(live.pop(rng.randrange(len(live))))
        else:
            piece = _piece(rng, step + 1, view)
            if piece is not None:
                view.add(piece)
                live.append(piece)
        snapshot = Snapshot(
            nodes, _queue(rng), view.running(), config=CONFIG, projects=PROJECTS,
            running_view=view,
        )  # fmt: skip
        assert view.check(snapshot) == []
        assert view.serves(snapshot) == (view.partial == 0)
        _same_decision(snapshot, 600.0)
        assert view.check(snapshot) == []  # the pass wrote to its own copies only


def test_a_view_of_other_nodes_or_another_default_limit_is_not_used() -> None:
    nodes = (node("n0", 4),)
    view = RunningView(nodes, CONFIG.default_time_limit_s)
    view.add(RunningJob(1, "n0", (0, 1), Resources(gpus=2), 0.0))
    snapshot = Snapshot(nodes, running=view.running(), config=CONFIG, running_view=view)
    assert view.serves(snapshot)
    assert not view.serves(replace(snapshot, nodes=(node("n0", 4),)))
    longer = replace(CONFIG, default_time_limit_s=1.0)
    assert not view.serves(replace(snapshot, config=longer))
    assert not view.serves(replace(snapshot, running=()))
    assert not view.serves(replace(snapshot, unmanaged_memory={("n0", 3): 2**30}))


def test_a_replay_with_quotas_wide_jobs_and_reclaims_agrees_with_a_fresh_count() -> None:
    # check_running_view compares the view with a fresh count before every pass, and the
    # pass's decision with one that counts afresh; it raises on any difference.
    rng = random.Random(5)
    jobs, t = [], 0.0
    for i in range(1, 201):
        t += rng.expovariate(1 / 15)
        jobs.append(TraceJob(i, t, rng.choice([30, 300, 2000]), rng.choice([1, 2, 4, 8, 12]),
                             project=rng.choice(["a", "b", "c"])))  # fmt: skip
    base = uniform_cluster(3, 8)
    projects = {"a": Project("a", quota=12), "b": Project("b", quota=8)}
    cluster = SimCluster("q", base.nodes, projects)
    options = SimOptions(interval_s=30.0, check_running_view=True)
    result = replay(Trace(tuple(jobs)), cluster, profile("default", SIM_BASE), "default", options)
    assert all(r.end_s is not None for r in result.records)
    assert sum(r.preemptions for r in result.records) > 0  # reclaims happened: taken victims


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_free_index_total_is_every_node_s_whole_free_gpus(seed: int) -> None:
    # FreeIndex.total stands in for a sum over every node when a wide job counts GPUs only.
    rng = random.Random(seed)
    nodes = _nodes(rng)
    view = RunningView(nodes, CONFIG.default_time_limit_s)
    for step in range(rng.randint(0, 20)):
        piece = _piece(rng, step + 1, view)
        if piece is not None:
            view.add(piece)
    index = FreeIndex.from_view(view)
    for _ in range(3):
        assert index.total() == sum(len(f.gpus) for f in index.frees)
        roomy = [f for f in index.frees if f.gpus]
        if not roomy:
            break
        f = rng.choice(roomy)
        index.take(Placement(f.node.name, (min(f.gpus),)), Resources(gpus=1))
    assert view.check(Snapshot(nodes, running=view.running(), config=CONFIG)) == []
