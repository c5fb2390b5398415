"""Property tests of `decide` over random clusters and random running + pending jobs.

Clusters: 1-4 nodes, 1-8 GPUs each (a few models), random NVLink/PCIe links, CPUs and memory
declared or not. Running jobs hold disjoint GPUs. Pending jobs ask for 0-9 GPUs, maybe a GPU
type, CPUs and memory, with tied priorities and submit times to exercise the ordering.
"""

from __future__ import annotations

import random
from collections import defaultdict
from itertools import combinations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.core.gpu_catalog import model_matches
from gpupool.core.hardware import Gpu, Link, LinkKind, Node
from gpupool.core.job import Resources
from gpupool.policy import (
    Code,
    PendingJob,
    RunningJob,
    Snapshot,
    check_satisfiable,
    decide,
)
from gpupool.policy.ordering import rank

GiB = 1 << 30
MODELS = ("A100-80GB", "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3")
GPU_TYPES = (None, None, None, "A100", "A100-80GB", "H100", "V100")  # V100: not in any pool
RUNNING_EXTRAS = [(None, None), (2, None), (8, 16 * GiB), (None, 16 * GiB)]  # (cpus, mem)

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def nodes_st(draw: st.DrawFn, name: str) -> Node:
    count = draw(st.integers(1, 8))
    # Models and links come from a seed: one draw instead of up to 36 keeps generation fast
    # (the failing snapshot is printed whole, so a seed loses nothing when debugging).
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    if rnd.random() < 0.5:
        models = [rnd.choice(MODELS)] * count
    else:
        models = [rnd.choice(MODELS) for _ in range(count)]
    gpus = tuple(Gpu(i, m, 80 * GiB) for i, m in enumerate(models))
    # One kind per GPU pair or none (undeclared, i.e. SYS); NVLink is the most common.
    choices = (None, LinkKind.NVLINK, LinkKind.NVLINK, *LinkKind)
    links = tuple(
        Link(a, b, kind)
        for a, b in combinations(range(count), 2)
        if (kind := rnd.choice(choices)) is not None
    )
    cpus = draw(st.sampled_from([0, 0, 8, 16, 64]))
    mem = draw(st.sampled_from([0, 0, 64 * GiB, 512 * GiB]))
    return Node(name, gpus, links, cpus=cpus, memory_bytes=mem)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    n_nodes = draw(st.integers(1, 4))
    nodes = tuple(draw(nodes_st(f"n{i}")) for i in range(n_nodes))

    running: list[RunningJob] = []
    next_id = 1000
    for n in nodes:
        # Each GPU is idle (None) or held by one of up to 3 running jobs on this node.
        owners = draw(
            st.lists(st.sampled_from([None, 0, 1, 2]), min_size=len(n.gpus), max_size=len(n.gpus))
        )
        held: dict[int, list[int]] = defaultdict(list)
        for g, owner in zip(n.gpus, owners):
            if owner is not None:
                held[owner].append(g.index)
        for owner in sorted(held):
            cpus, mem = draw(st.sampled_from(RUNNING_EXTRAS))
            request = Resources(len(held[owner]), None, cpus, mem)
            running.append(RunningJob(next_id, n.name, tuple(held[owner]), request, 0.0))
            next_id += 1

    n_jobs = draw(st.integers(1, 10))
    jobs = draw(
        st.lists(
            st.tuples(
                st.integers(0, 9),
                st.sampled_from(GPU_TYPES),
                st.sampled_from([None, None, 1, 4, 16, 128]),
                st.sampled_from([None, None, 8 * GiB, 128 * GiB, 1024 * GiB]),
                st.sampled_from([100, 200, 300]),
                st.integers(0, 4),
            ),
            min_size=n_jobs,
            max_size=n_jobs,
        )
    )
    pending = tuple(
        PendingJob(i + 1, Resources(g, ty, c, m), prio, float(t))
        for i, (g, ty, c, m, prio, t) in enumerate(jobs)
    )
    return Snapshot(nodes=nodes, pending=pending, running=tuple(running))


def _jobs(snap: Snapshot) -> dict[int, PendingJob]:
    return {j.id: j for j in snap.pending}


# (1) allocation is valid -----------------------------------------------------------------------


@SETTINGS
@given(snapshots())
def test_no_overallocation_and_starts_match_node_and_type(snap: Snapshot) -> None:
    d = decide(snap, 0.0)
    nodes = {n.name: n for n in snap.nodes}
    jobs = _jobs(snap)
    held: dict[str, list[int]] = defaultdict(list)
    for r in snap.running:
        held[r.node].extend(r.gpus)
    for s in d.starts:
        assert s.node in nodes, s
        node = nodes[s.node]
        req = jobs[s.job_id].resources
        for g in s.gpus:
            model = node.gpu(g).model  # KeyError if the GPU is not on that node
            if req.gpu_type:
                assert model_matches(req.gpu_type, model), (s, model)
        held[s.node].extend(s.gpus)
    for name, used in held.items():
        assert len(used) == len(set(used)), f"a GPU of {name} given twice: {sorted(used)}"
        assert len(used) <= len(nodes[name].gpus)

    # Declared CPUs and memory: what this pass starts fits in what the running jobs left.
    for n in snap.nodes:
        here = [r.resources for r in snap.running if r.node == n.name]
        new = [jobs[s.job_id].resources for s in d.starts if s.node == n.name]
        new_cpus = sum(r.cpus or 0 for r in new)
        new_mem = sum(r.mem_bytes or 0 for r in new)
        if n.cpus and new_cpus:
            assert new_cpus <= n.cpus - sum(r.cpus or 0 for r in here), n.name
        if n.memory_bytes and new_mem:
            assert new_mem <= n.memory_bytes - sum(r.mem_bytes or 0 for r in here), n.name


# (2) gang: all of a job's GPUs or none ---------------------------------------------------------


@SETTINGS
@given(snapshots())
def test_each_start_has_exactly_the_requested_gpus(snap: Snapshot) -> None:
    jobs = _jobs(snap)
    for s in decide(snap, 0.0).starts:
        assert len(s.gpus) == jobs[s.job_id].resources.gpus, s
        assert len(set(s.gpus)) == len(s.gpus), s


# (3) determinism -------------------------------------------------------------------------------


@SETTINGS
@given(snapshots(), st.randoms(use_true_random=False))
def test_same_input_same_decision_whatever_the_tuple_order(
    snap: Snapshot, rnd: random.Random
) -> None:
    first = decide(snap, 0.0)
    assert decide(snap, 0.0) == first

    pend, run, nodes = list(snap.pending), list(snap.running), list(snap.nodes)
    rnd.shuffle(pend)
    rnd.shuffle(run)
    rnd.shuffle(nodes)
    shuffled = Snapshot(nodes=tuple(nodes), pending=tuple(pend), running=tuple(run))
    again = decide(shuffled, 0.0)
    assert again.starts == first.starts  # same jobs, same nodes, same GPUs, same order
    assert dict(again.pending) == dict(first.pending)


# (4) every job that did not start says why -----------------------------------------------------


@SETTINGS
@given(snapshots())
def test_every_pending_job_starts_or_has_a_reason(snap: Snapshot) -> None:
    d = decide(snap, 0.0)
    started = [s.job_id for s in d.starts]
    assert len(started) == len(set(started)), "a job started twice"
    assert set(started).isdisjoint(d.pending)
    assert set(started) | set(d.pending) == set(_jobs(snap))
    for status in d.pending.values():
        assert isinstance(status.code, Code)
        assert status.message


# (5) strict order: nothing behind a blocked job starts -----------------------------------------


@SETTINGS
@given(snapshots())
def test_no_job_behind_a_blocked_one_starts(snap: Snapshot) -> None:
    d = decide(snap, 0.0)
    started = {s.job_id for s in d.starts}
    blocker: int | None = None
    for job in rank(snap, 0.0)[0]:
        status = d.pending.get(job.id)
        if status is not None and status.code is Code.UNSATISFIABLE:
            continue  # never runnable: it blocks nobody
        if blocker is None:
            if job.id not in started:
                assert status is not None and status.code is Code.RESOURCES, (job, status)
                blocker = job.id
        else:
            assert job.id not in started, f"job {job.id} started behind blocked job {blocker}"
            assert status is not None and status.code is Code.PRIORITY, (job, status)
            assert f"job {blocker}" in status.message
    assert sum(1 for s in d.pending.values() if s.code is Code.RESOURCES) <= 1


@SETTINGS
@given(snapshots())
def test_the_blocked_job_really_does_not_fit_anywhere_now(snap: Snapshot) -> None:
    """An oracle, independent of placement.py: after the running jobs and this pass's starts,
    no node has enough free matching GPUs, CPUs and memory for the job that blocks."""
    d = decide(snap, 0.0)
    blocked = [jid for jid, s in d.pending.items() if s.code is Code.RESOURCES]
    if not blocked:
        return
    job = _jobs(snap)[blocked[0]]
    req = job.resources
    jobs = _jobs(snap)
    taken = [(r.node, r.gpus, r.resources) for r in snap.running]
    taken += [(s.node, s.gpus, jobs[s.job_id].resources) for s in d.starts]
    for n in snap.nodes:
        mine = [t for t in taken if t[0] == n.name]
        used = {g for _, gs, _ in mine for g in gs}
        free_gpus = [
            g.index
            for g in n.gpus
            if g.index not in used and (not req.gpu_type or model_matches(req.gpu_type, g.model))
        ]
        fits = len(free_gpus) >= req.gpus
        if n.cpus and req.cpus:
            fits = fits and n.cpus - sum(r.cpus or 0 for _, _, r in mine) >= req.cpus
        if n.memory_bytes and req.mem_bytes:
            fits = (
                fits and n.memory_bytes - sum(r.mem_bytes or 0 for _, _, r in mine) >= req.mem_bytes
            )
        assert not fits, f"job {job.id} waits for Resources but fits on {n.name}"
        assert f"node {n.name}:" in d.pending[job.id].message


# feasibility agrees with placement -------------------------------------------------------------


@SETTINGS
@given(snapshots())
def test_unsatisfiable_exactly_when_check_satisfiable_says_so(snap: Snapshot) -> None:
    d = decide(snap, 0.0)
    for job in snap.pending:
        verdict = check_satisfiable(job.resources, snap.nodes)
        status = d.pending.get(job.id)
        if verdict is None:
            assert status is None or status.code is not Code.UNSATISFIABLE
        else:
            assert status == verdict


@SETTINGS
@given(snapshots())
def test_a_satisfiable_job_alone_on_the_empty_pool_starts(snap: Snapshot) -> None:
    """check_satisfiable promises that some node could run the job with everything else gone;
    if that promise is wrong, the job blocks the whole queue forever."""
    for job in snap.pending:
        alone = decide(Snapshot(nodes=snap.nodes, pending=(job,)), 0.0)
        if check_satisfiable(job.resources, snap.nodes) is None:
            assert [s.job_id for s in alone.starts] == [job.id], alone.pending
        else:
            assert alone.starts == () and set(alone.pending) == {job.id}
            assert alone.pending[job.id].code is Code.UNSATISFIABLE
