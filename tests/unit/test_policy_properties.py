"""Property tests of `decide` over random clusters and random running + pending jobs.

Clusters: 1-4 nodes, 1-8 GPUs each (a few models), random NVLink/PCIe links, CPUs and memory
declared or not. Running jobs hold disjoint GPUs, with or without time limits (some already
past them). Pending jobs ask for 0-9 GPUs, maybe a GPU type, CPUs and memory, with tied
priorities and submit times to exercise the ordering, time limits or not, and some --begin
holds. Decisions are taken at NOW.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace
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
from gpupool.policy.reasons import Dimension
from gpupool.policy.render import status_text

GiB = 1 << 30
MODELS = ("A100-80GB", "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3")
GPU_TYPES = (None, None, None, "A100", "A100-80GB", "H100", "V100")  # V100: not in any pool
RUNNING_EXTRAS = [(None, None), (2, None), (8, 16 * GiB), (None, 16 * GiB)]  # (cpus, mem)
LIMITS = (None, 50.0, 100.0, 1000.0)
NOW = 60.0  # some running jobs (started at 0, limit 50) are past their limit

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
            limit = draw(st.sampled_from(LIMITS))
            running.append(
                RunningJob(next_id, n.name, tuple(held[owner]), request, 0.0, time_limit_s=limit)
            )
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
                st.sampled_from(LIMITS),
                st.sampled_from([None, None, None, 10.0, 100.0]),
            ),
            min_size=n_jobs,
            max_size=n_jobs,
        )
    )
    pending = tuple(
        PendingJob(i + 1, Resources(g, ty, c, m), prio, float(t), time_limit_s=lim, begin_time=b)
        for i, (g, ty, c, m, prio, t, lim, b) in enumerate(jobs)
    )
    return Snapshot(nodes=nodes, pending=pending, running=tuple(running))


def _jobs(snap: Snapshot) -> dict[int, PendingJob]:
    return {j.id: j for j in snap.pending}


# (1) allocation is valid -----------------------------------------------------------------------


@SETTINGS
@given(snapshots())
def test_no_overallocation_and_starts_match_node_and_type(snap: Snapshot) -> None:
    d = decide(snap, NOW)
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
    for s in decide(snap, NOW).starts:
        assert len(s.gpus) == jobs[s.job_id].resources.gpus, s
        assert len(set(s.gpus)) == len(s.gpus), s


# (3) determinism -------------------------------------------------------------------------------


@SETTINGS
@given(snapshots(), st.randoms(use_true_random=False))
def test_same_input_same_decision_whatever_the_tuple_order(
    snap: Snapshot, rnd: random.Random
) -> None:
    first = decide(snap, NOW)
    assert decide(snap, NOW) == first

    pend, run, nodes = list(snap.pending), list(snap.running), list(snap.nodes)
    rnd.shuffle(pend)
    rnd.shuffle(run)
    rnd.shuffle(nodes)
    shuffled = Snapshot(nodes=tuple(nodes), pending=tuple(pend), running=tuple(run))
    again = decide(shuffled, NOW)
    assert again.starts == first.starts  # same jobs, same nodes, same GPUs, same order
    assert dict(again.pending) == dict(first.pending)
    assert again.reservations == first.reservations
    assert dict(again.estimated_start) == dict(first.estimated_start)


# (4) every job that did not start says why -----------------------------------------------------


@SETTINGS
@given(snapshots())
def test_every_pending_job_starts_or_has_a_reason(snap: Snapshot) -> None:
    d = decide(snap, NOW)
    started = [s.job_id for s in d.starts]
    assert len(started) == len(set(started)), "a job started twice"
    assert set(started).isdisjoint(d.pending)
    assert set(started) | set(d.pending) == set(_jobs(snap))
    for status in d.pending.values():
        assert isinstance(status.code, Code)
        assert status_text(status)


# (5) EASY backfill: one reservation, for the first job that cannot start, never delayed -------


def _end(snap: Snapshot, limit: float | None) -> float:
    return NOW + (snap.config.default_time_limit_s if limit is None else limit)


@SETTINGS
@given(snapshots())
def test_the_first_blocked_job_gets_the_one_reservation_and_later_starts_keep_off_it(
    snap: Snapshot,
) -> None:
    d = decide(snap, NOW)
    started = {s.job_id: s for s in d.starts}
    assert len(d.reservations) <= 1
    reservation = d.reservations[0] if d.reservations else None
    head: int | None = None
    for job in rank(snap, NOW)[0]:
        status = d.pending.get(job.id)
        if status is not None and status.code in (Code.UNSATISFIABLE, Code.BEGIN_TIME):
            continue  # never runnable, or not yet: it blocks nobody
        if head is None:
            if job.id not in started:
                assert status is not None and status.code is Code.RESOURCES, (job, status)
                head = job.id
                assert reservation is not None and reservation.job_id == head
                assert reservation.time >= NOW
                assert d.estimated_start[head] == reservation.time
                assert "reserved" in status_text(status)
        elif job.id in started:
            # A job started behind the reserved one ends by the reservation time, or keeps
            # off its GPUs (CPUs and memory: the simulation in test_policy_backfill checks).
            assert reservation is not None
            s = started[job.id]
            assert (
                _end(snap, job.time_limit_s) <= reservation.time
                or s.node != reservation.node
                or not set(s.gpus) & set(reservation.gpus)
            ), (s, reservation)
        else:
            assert status is not None and status.code in (Code.RESOURCES, Code.PRIORITY)
            if status.code is Code.PRIORITY:
                assert f"waiting for job {head}," in status_text(status)
    if head is None:
        assert reservation is None
        assert not any(s.code is Code.PRIORITY for s in d.pending.values())


@SETTINGS
@given(snapshots())
def test_the_reservation_is_a_valid_placement_and_estimates_are_where_promised(
    snap: Snapshot,
) -> None:
    d = decide(snap, NOW)
    nodes = {n.name: n for n in snap.nodes}
    jobs = _jobs(snap)
    for r in d.reservations:
        req = jobs[r.job_id].resources
        assert len(r.gpus) == len(set(r.gpus)) == req.gpus
        for g in r.gpus:
            model = nodes[r.node].gpu(g).model
            assert not req.gpu_type or model_matches(req.gpu_type, model)
    reserved = {r.job_id for r in d.reservations}
    for job_id, at in d.estimated_start.items():
        job = jobs[job_id]
        if job_id not in reserved:
            assert d.pending[job_id].code is Code.BEGIN_TIME and at == job.begin_time
    for job in snap.pending:
        held = job.begin_time is not None and job.begin_time > NOW
        if held and check_satisfiable(job.resources, snap.nodes) is None:
            assert d.pending[job.id].code is Code.BEGIN_TIME


@SETTINGS
@given(snapshots())
def test_a_job_waiting_for_resources_really_does_not_fit_anywhere_now(snap: Snapshot) -> None:
    """An oracle, independent of placement.py: after the running jobs and this pass's starts,
    no node has enough free matching GPUs, CPUs and memory for a job that waits for Resources
    (what is free only shrinks during a pass, so what did not fit at its turn does not fit at
    the end)."""
    d = decide(snap, NOW)
    jobs = _jobs(snap)
    reserved = {r.job_id for r in d.reservations}
    taken = [(r.node, r.gpus, r.resources) for r in snap.running]
    taken += [(s.node, s.gpus, jobs[s.job_id].resources) for s in d.starts]
    for job_id, status in d.pending.items():
        if status.code is not Code.RESOURCES:
            continue
        req = jobs[job_id].resources
        for n in snap.nodes:
            mine = [t for t in taken if t[0] == n.name]
            used = {g for _, gs, _ in mine for g in gs}
            free_gpus = [
                g.index
                for g in n.gpus
                if g.index not in used
                and (not req.gpu_type or model_matches(req.gpu_type, g.model))
            ]
            fits = len(free_gpus) >= req.gpus
            if n.cpus and req.cpus:
                fits = fits and n.cpus - sum(r.cpus or 0 for _, _, r in mine) >= req.cpus
            if n.memory_bytes and req.mem_bytes:
                left = n.memory_bytes - sum(r.mem_bytes or 0 for _, _, r in mine)
                fits = fits and left >= req.mem_bytes
            assert not fits, f"job {job_id} waits for Resources but fits on {n.name}"
        if job_id in reserved:  # its status says what binds, as data
            assert status.short is not None and status.reserved is not None
            if req.gpu_type or req.cpus or req.mem_bytes:  # each node's binding check
                assert {i.node for i in status.nodes} == {n.name for n in snap.nodes}
            else:  # counted: the node with the most free GPUs has too few
                assert status.short.dimension is Dimension.GPU_COUNT
                assert status.short.requested == req.gpus > status.short.free


# feasibility agrees with placement -------------------------------------------------------------


@SETTINGS
@given(snapshots())
def test_unsatisfiable_exactly_when_check_satisfiable_says_so(snap: Snapshot) -> None:
    d = decide(snap, NOW)
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
        job = replace(job, begin_time=None)
        alone = decide(Snapshot(nodes=snap.nodes, pending=(job,)), NOW)
        if check_satisfiable(job.resources, snap.nodes) is None:
            assert [s.job_id for s in alone.starts] == [job.id], alone.pending
        else:
            assert alone.starts == () and set(alone.pending) == {job.id}
            assert alone.pending[job.id].code is Code.UNSATISFIABLE
