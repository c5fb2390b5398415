"""Fractional GPUs and EASY backfill: a fractional job takes the reservation like any other
(GPU memory over time: the earliest time some GPU has room for it), and a job that would
outlast a reservation keeps off the reserved GPUs (shared ones included), or, for a fractional
reservation, shares its GPU only within the memory the reserved job leaves."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_builders import GiB, node
from test_fractional_placement import frac, running

from gpupool.core.hardware import Gpu, Node
from gpupool.core.job import Resources
from gpupool.policy import Code, PendingJob, RunningJob
from gpupool.policy.backfill import reserve
from gpupool.policy.decide import decide
from gpupool.policy.free_view import free_view
from gpupool.policy.node_index import CountedIndex
from gpupool.policy.render import reserved_text, status_text
from gpupool.policy.snapshot import PolicyConfig, PriorityWeights, Snapshot
from gpupool.policy.timeline import Release


def box(count: int = 1):
    return node("box", count)


def whole(job_id: int, gpu: int, ends: float) -> RunningJob:
    return RunningJob(job_id, "box", (gpu,), Resources(gpus=1), 0.0, time_limit_s=ends)


def test_a_fractional_job_reserves_memory_on_the_gpu_that_has_room_first() -> None:
    n = box(1)
    frees = free_view(Snapshot(nodes=(n,), running=(running(1, 0, frac(0.75), 60 * GiB),)))[0]
    releases = [Release(500.0, "box", (0,), frac(0.75), 60 * GiB)]
    shadow = reserve(9, frac(0.5), frees, releases, now=0.0)
    assert shadow is not None
    assert (shadow.time, shadow.reservation.gpus, shadow.reservation.gpu_memory_bytes) == (
        500.0,
        (0,),
        40 * GiB,
    )
    assert reserved_text(shadow.reserved()) == "reserved 40GiB of GPU 0 on box from now+8m20s"
    w = reserve(9, Resources(gpus=1), frees, releases, now=0.0)
    assert w is not None and w.time == 500.0 and w.reservation.gpus == (0,)
    assert w.reservation.gpu_memory_bytes is None


def test_the_only_pending_job_a_half_gpu_gets_the_reservation_and_an_estimate() -> None:
    """The issue's case: two GPUs held whole; a 0.5-GPU job first in line, a 1-GPU job after
    it. The half job reserves the GPU that frees first; the whole job does not take it."""
    run = (whole(1, 0, 100.0), whole(2, 1, 200.0))
    pending = (
        PendingJob(3, frac(0.5), 200, 1.0, time_limit_s=50.0),
        PendingJob(4, Resources(gpus=1), 200, 2.0, time_limit_s=50.0),
    )
    d = decide(Snapshot(nodes=(box(2),), running=run, pending=pending), now=0.0)
    assert d.starts == ()
    (r,) = d.reservations
    assert (r.job_id, r.gpus, r.time, r.gpu_memory_bytes) == (3, (0,), 100.0, 40 * GiB)
    assert d.estimated_start == {3: 100.0}
    assert d.pending[3].code is Code.RESOURCES
    assert "reserved 40GiB of GPU 0" in status_text(d.pending[3])
    assert d.pending[4].code is Code.RESOURCES and 4 not in d.estimated_start


def test_a_job_outlasting_a_fractional_reservation_shares_its_gpu_only_within_the_rest() -> None:
    """GPU 0 (80GiB) has a 0.75 job until 100 and GPU 1 is held whole until 1000. A 0.5 job
    reserves 40GiB of GPU 0 at 100, which leaves 40GiB: a long 0.25 job may share GPU 0 now
    (20GiB free now, 40GiB spare then), a second one then finds 0 free now; a long whole job
    may not take GPU 0 at 100 (it is not free now anyway), and a 0.5 long job waits."""
    run = (
        whole(1, 1, 1000.0),
        RunningJob(2, "box", (0,), frac(0.75), 0.0, time_limit_s=100.0, gpu_memory_bytes=60 * GiB),
    )
    pending = (
        PendingJob(3, frac(0.5), 300, 1.0, time_limit_s=50.0),
        PendingJob(4, frac(0.25), 200, 2.0, time_limit_s=5000.0),
        PendingJob(5, frac(0.25), 200, 3.0, time_limit_s=5000.0),
    )
    d = decide(Snapshot(nodes=(box(2),), running=run, pending=pending), now=0.0)
    assert [(r.job_id, r.gpus, r.gpu_memory_bytes) for r in d.reservations] == [(3, (0,), 40 * GiB)]
    assert [(s.job_id, s.gpus) for s in d.starts] == [(4, (0,))]
    assert d.pending[5].code is Code.RESOURCES  # GPU 0 is full now


def test_a_long_fractional_job_may_not_eat_into_the_reserved_memory() -> None:
    """As above but the reserved job needs 0.75: at 100 GPU 0 has 80GiB, 60 for it, 20 spare.
    A long 0.25 job (20GiB) fits the spare; a long 0.3 job (24GiB) does not: it fits now but
    would delay the reservation, so it waits with Priority."""
    run = (
        whole(1, 1, 1000.0),
        RunningJob(2, "box", (0,), frac(0.5), 0.0, time_limit_s=100.0, gpu_memory_bytes=40 * GiB),
    )
    pending = (
        PendingJob(3, frac(0.75), 300, 1.0, time_limit_s=50.0),
        PendingJob(4, frac(0.3), 200, 2.0, time_limit_s=5000.0),
        PendingJob(5, frac(0.25), 200, 3.0, time_limit_s=5000.0),
        PendingJob(6, frac(0.25), 200, 4.0, time_limit_s=5000.0),
        PendingJob(7, frac(0.5), 200, 5.0, time_limit_s=100.0),  # ends by then: may start
    )
    # The case is about the jobs after the reservation, taken in submit order: without the
    # service factor, which would put the shortest (job 7) first (ordering.py).
    config = PolicyConfig(weights=PriorityWeights(service=0.0))
    snapshot = Snapshot(nodes=(box(2),), running=run, pending=pending, config=config)
    d = decide(snapshot, now=0.0)
    assert [r.job_id for r in d.reservations] == [3]
    assert d.pending[4].code is Code.PRIORITY and "waiting for job 3" in status_text(d.pending[4])
    assert [(s.job_id, s.gpus) for s in d.starts] == [(5, (0,))]
    # The spare (20GiB) is used up by job 5: job 6 would delay the reservation too, and job 7
    # (ends by then) finds no room now (40GiB granted + 20GiB: 20GiB left, it needs 40).
    assert d.pending[6].code is Code.PRIORITY
    assert d.pending[7].code is Code.RESOURCES


def test_reservation_sees_a_shared_gpu_freed_only_when_all_its_jobs_end() -> None:
    n = box(1)
    run = (running(1, 0, frac(0.5), 40 * GiB), running(2, 0, frac(0.25), 20 * GiB))
    frees = free_view(Snapshot(nodes=(n,), running=run))[0]
    releases = [
        Release(100.0, "box", (0,), frac(0.5), 40 * GiB),
        Release(300.0, "box", (0,), frac(0.25)),  # memory recomputed: 20GiB
    ]
    shadow = reserve(9, Resources(gpus=1), frees, releases, now=0.0)
    assert shadow is not None and shadow.time == 300.0


def test_fractional_job_outlasting_the_reservation_keeps_off_reserved_gpus() -> None:
    # GPU 0 is shared and its job ends at 100: the whole job at the head reserves it then.
    # GPU 1 is held whole until 1000. A long fractional job may not share GPU 0 now, a short
    # one may (it ends before the reservation).
    run = (
        RunningJob(1, "box", (1,), Resources(gpus=1), 0.0, time_limit_s=1000.0),
        RunningJob(2, "box", (0,), frac(0.25), 0.0, time_limit_s=100.0, gpu_memory_bytes=20 * GiB),
    )
    pending = (
        PendingJob(3, Resources(gpus=1), 300, 1.0),
        PendingJob(4, frac(0.25), 200, 2.0, time_limit_s=5000.0),
        PendingJob(5, frac(0.25), 200, 3.0, time_limit_s=50.0),
    )
    d = decide(Snapshot(nodes=(box(2),), running=run, pending=pending), now=0.0)
    assert [r.gpus for r in d.reservations] == [(0,)]
    assert [(s.job_id, s.gpus) for s in d.starts] == [(5, (0,))]
    assert d.pending[4].code.value == "Priority"


def test_free_index_places_fractions_on_nodes_without_free_gpus() -> None:
    run = (running(1, 0, frac(0.5), 40 * GiB),)
    index = CountedIndex(Snapshot(nodes=(box(1),), running=run), now=0.0)
    assert index.most() == 1
    placement = index.place(frac(0.5))
    assert placement is not None and placement.gpus == (0,)
    index.take(placement, frac(0.5))
    assert index.place(frac(0.1)) is None


# --- a reserved job is never delayed by jobs backfilled around it, fractions included ------

DEFAULT_LIMIT = 60.0
SIZES = (40 * GiB, 80 * GiB)
FRACTIONAL = (
    Resources(gpus=1, gpu_fraction=0.25),
    Resources(gpus=1, gpu_fraction=0.5),
    Resources(gpus=1, gpu_fraction=0.75),
    Resources(gpus=1, gpu_memory_bytes=10 * GiB),
    Resources(gpus=1, gpu_memory_bytes=30 * GiB),
    Resources(gpus=1, gpu_memory_bytes=60 * GiB),
)


@st.composite
def shared_clusters(draw: st.DrawFn) -> Snapshot:
    """1-2 nodes of 1-4 GPUs of 40 or 80 GiB, some with CPUs; each GPU idle, held whole, or
    shared by 1-3 fractional jobs; every running job ends exactly in (0, 200]. Pending: a
    fractional job first in line (the highest class), then 0-7 jobs, whole (0-3 GPUs, maybe
    CPUs) or fractional, with time limits (or the default), no --begin."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    nodes: list[Node] = []
    live: list[RunningJob] = []

    def end() -> float:
        return float(rnd.randint(1, 200))

    for n in range(rnd.randint(1, 2)):
        name = f"n{n}"
        sizes = [rnd.choice(SIZES) for _ in range(rnd.randint(1, 4))]
        cpus = rnd.choice([0, 8])
        nodes.append(
            Node(name, tuple(Gpu(i, "A100", s) for i, s in enumerate(sizes)), (), cpus=cpus)
        )
        for g, size in enumerate(sizes):
            kind = rnd.choice(["idle", "whole", "shared", "shared"])
            if kind == "whole":
                res = Resources(gpus=1, cpus=rnd.choice([None, 2]))
                live.append(RunningJob(1000 + len(live), name, (g,), res, 0.0, time_limit_s=end()))
            elif kind == "shared":
                room = size
                for _ in range(rnd.randint(1, 3)):
                    res = rnd.choice(FRACTIONAL)
                    nbytes = res.gpu_memory_bytes or int((res.gpu_fraction or 0) * size)
                    if nbytes > room:
                        continue
                    room -= nbytes
                    live.append(
                        RunningJob(
                            1000 + len(live), name, (g,), res, 0.0, time_limit_s=end(),
                            gpu_memory_bytes=nbytes,
                        )
                    )  # fmt: skip
    limits = [None, 5.0, 30.0, 100.0, 300.0]
    head = PendingJob(1, rnd.choice(FRACTIONAL), 300, 0.0, time_limit_s=rnd.choice(limits))
    more = []
    for i in range(draw(st.integers(0, 7))):
        if rnd.random() < 0.5:
            res = rnd.choice(FRACTIONAL)
        else:
            res = Resources(gpus=rnd.randint(0, 3), cpus=rnd.choice([None, None, 4]))
        more.append(
            PendingJob(
                i + 2, res, rnd.choice([100, 200]), float(i), time_limit_s=rnd.choice(limits)
            )
        )
    config = PolicyConfig(default_time_limit_s=DEFAULT_LIMIT)
    return Snapshot(tuple(nodes), (head, *more), tuple(live), config=config)


def _end(start: float, limit: float | None) -> float:
    return start + (DEFAULT_LIMIT if limit is None else limit)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_clusters())
def test_a_reserved_fractional_job_is_never_delayed_by_backfilled_jobs(snap: Snapshot) -> None:
    """decide() at time 0 and at every job end (jobs end exactly at start + limit), starting
    what it says: the fractional job first in line starts now or holds the reservation, and
    the job reserved at time T (fractional or whole) starts by T."""
    now = 0.0
    decision = decide(snap, now)
    head = snap.pending[0]
    started = {s.job_id for s in decision.starts}
    if head.id not in started and decision.pending[head.id].code is not Code.UNSATISFIABLE:
        assert [r.job_id for r in decision.reservations] == [head.id], decision.pending[head.id]
        assert decision.reservations[0].gpu_memory_bytes is not None
        assert decision.estimated_start[head.id] == decision.reservations[0].time
    if not decision.reservations:
        return
    reservation = decision.reservations[0]
    waiting = {j.id: j for j in snap.pending}
    live = list(snap.running)
    while True:
        for s in decision.starts:
            if s.job_id == reservation.job_id:
                assert now <= reservation.time
                return
            j = waiting.pop(s.job_id)
            live.append(
                RunningJob(
                    j.id, s.node, s.gpus, j.resources, now, time_limit_s=j.time_limit_s,
                    gpu_memory_bytes=s.gpu_memory_bytes,
                )
            )  # fmt: skip
        ends = [_end(r.start_time, r.time_limit_s) for r in live]
        assert ends, f"job {reservation.job_id} never started: {dict(decision.pending)}"
        now = min(ends)
        assert now <= reservation.time, (
            f"job {reservation.job_id} was reserved {reservation} but has not started by then: "
            f"{decision.pending[reservation.job_id]}"
        )
        live = [r for r, e in zip(live, ends) if e > now]
        snap = replace(snap, pending=tuple(waiting.values()), running=tuple(live))
        decision = decide(snap, now)
