"""The running view a replay keeps between passes (policy/running_view.py) agrees with a
fresh count of the running jobs after any sequence of starts and stops, a pass never writes
to it, and a pass that uses it decides exactly as one that counts afresh; the node index over
it (`KeptIndex`) answers as the plain one (`CountedIndex`)."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import node

from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy.decide import decide
from gpupool.policy.node_index import CountedIndex, KeptIndex, NodeIndex, node_index
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


def _answers(index: NodeIndex, taken: set[int]) -> tuple[object, ...]:
    """Everything a pass reads of a node index, in an order-free form."""
    frees = [(f.node.name, sorted(f.gpus), f.cpus, f.mem_bytes) for f in index.frees]
    return (
        frees,
        index.total(),
        index.most(),
        index.most(index.frees[0].node.name),
        index.fullest(),
        sorted(index.releases(taken), key=repr),
        sorted(index.releases(taken, {index.frees[0].node.name}, 900.0), key=repr),
        sorted(index.ends(taken)),
        [index.place(Resources(gpus=g)) for g in (1, 2, 4, 8)],
        [index.place(Resources(gpus=g, cpus=8)) for g in (1, 3)],
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_kept_index_answers_as_the_counted_one(seed: int) -> None:
    """The two node indexes (policy/node_index.py), side by side as a pass takes GPUs from
    them: the same frees, counts, releases, expected ends and placements; and `node_index`
    takes the kept one exactly when the view serves."""
    rng = random.Random(seed)
    nodes = _nodes(rng)
    view = RunningView(nodes, CONFIG.default_time_limit_s)
    for step in range(rng.randint(0, 20)):
        piece = _piece(rng, step + 1, view)
        if piece is not None:
            view.add(piece)
    snapshot = Snapshot(nodes, running=view.running(), config=CONFIG, running_view=view)
    chosen = node_index(snapshot, 600.0)
    assert isinstance(chosen, KeptIndex) == view.serves(snapshot)
    if not view.serves(snapshot):
        return
    kept, counted = KeptIndex(snapshot, view, 600.0), CountedIndex(snapshot, 600.0)
    running = view.running()
    taken = {r.id for r in running if rng.random() < 0.3}
    for _ in range(4):
        assert kept.total() == sum(len(f.gpus) for f in kept.frees)
        assert _answers(kept, taken) == _answers(counted, taken)
        roomy = [f for f in kept.frees if f.gpus]
        if not roomy:
            break
        f = rng.choice(roomy)
        placement = Placement(f.node.name, (min(f.gpus),))
        kept.take(placement, Resources(gpus=1))
        counted.take(placement, Resources(gpus=1))
    assert view.check(Snapshot(nodes, running=running, config=CONFIG)) == []  # not written
