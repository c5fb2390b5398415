"""EASY's guarantee for a wide job's reservation pinned to its nodes (policy/wide.py), on
random pools under both wide placements: a job that starts beside it and outlasts it never
takes a GPU it holds, nor more CPUs than its nodes have spare at its time; the wide job's
reserved start never moves later for the jobs that started beside it; and the placement
beside it is `place`'s best fit on the spare views (`WideShadow.place_beside`)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_builders import node, pending, res, running

from gpupool.policy import Decision, PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.node_index import CountedIndex
from gpupool.policy.placement import place
from gpupool.policy.request import expected_end
from gpupool.policy.snapshot import PolicyConfig, WidePlacement
from gpupool.policy.wide import reserve_wide

WIDE_ID = 1  # the wide job, first in the queue: every other start is backfill
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _running(rnd: random.Random, cluster_names: list[str]) -> list[RunningJob]:
    """Some GPUs of each node held by jobs ending at 1-300 (a few spread over two nodes)."""
    live: list[RunningJob] = []
    free = {name: list(range(8)) for name in cluster_names}
    for name in cluster_names:
        rnd.shuffle(free[name])
        while free[name] and rnd.random() < 0.6:
            k = rnd.randint(1, len(free[name]))
            held, free[name] = sorted(free[name][:k]), free[name][k:]
            cpus = rnd.choice([None, 4])
            job = replace(running(100 + len(live), name, held, cpus=cpus),
                          time_limit_s=float(rnd.randint(1, 300)))  # fmt: skip
            live.append(job)
    if len(cluster_names) > 1 and rnd.random() < 0.3:  # one spread job: an entry per node
        a, b = cluster_names[:2]
        if free[a] and free[b]:
            for name in (a, b):
                gpus = sorted(free[name])
                live.append(replace(running(99, name, gpus), time_limit_s=250.0))
                free[name] = []
    return live


@st.composite
def pools(draw: st.DrawFn) -> Snapshot:
    """2-6 nodes of 8 GPUs (some with 16 CPUs), partly held; a wide job (9 GPUs up to the
    pool's total, with or without CPUs) first in the queue, then 1-10 jobs of 1-16 GPUs
    with time limits, some wide too."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    cluster = tuple(
        node(f"n{i}", 8, cpus=rnd.choice([0, 16, 16])) for i in range(rnd.randint(2, 6))
    )
    live = _running(rnd, [n.name for n in cluster])
    wide = replace(
        pending(
            WIDE_ID, rnd.randint(9, 8 * len(cluster)), prio=300, cpus=rnd.choice([None, 4, 12, 12])
        ),
        time_limit_s=rnd.choice([None, 200.0]),
    )
    later = tuple(
        replace(
            pending(i + 2, rnd.choice([1, 1, 2, 3, 4, 8, rnd.randint(1, 16)]),
                    cpus=rnd.choice([None, None, 4, 8])),
            time_limit_s=rnd.choice([None, 10.0, 50.0, 150.0, 400.0, 7080.0, 7080.0]),
        )
        for i in range(draw(st.integers(1, 10)))
    )  # fmt: skip
    rule = draw(st.sampled_from(list(WidePlacement)))
    config = PolicyConfig(spread_wide_jobs=True, default_time_limit_s=100.0, wide_placement=rule)
    return Snapshot(cluster, (wide, *later), tuple(live), config=config)


def _wide_reserved(snap: Snapshot) -> tuple[Decision, float] | None:
    """The pass at 0 and the wide job's reservation time, when it holds the reservation."""
    d = decide(snap, 0.0)
    if not d.reservations or d.reservations[0].job_id != WIDE_ID:
        return None
    return d, d.reservations[0].time


def _outlasts(job: PendingJob, snap: Snapshot, time: float) -> bool:
    end = expected_end(0.0, job.time_limit_s, snap.config.default_time_limit_s)
    return end > time or math.isinf(end)


@SETTINGS
@given(pools())
def test_a_backfilled_job_never_takes_what_the_wide_reservation_holds(snap: Snapshot) -> None:
    found = _wide_reserved(snap)
    if found is None:
        return
    d, time = found
    (r,) = d.reservations
    held = {(name, g) for name, gpus in r.parts() for g in gpus}
    assert len(r.parts()) >= 2  # wider than any node
    jobs = {j.id: j for j in snap.pending}
    wide_cpus = jobs[WIDE_ID].resources.cpus or 0
    # CPUs at the reservation time on each reserved node: what outlasts it, plus the job's.
    cpus = {name: wide_cpus for name, _ in r.parts()}
    default = snap.config.default_time_limit_s
    for x in snap.running:
        if x.node in cpus and expected_end(x.start_time, x.time_limit_s, default) > time:
            cpus[x.node] += x.resources.cpus or 0
    for s in d.starts:
        job = jobs[s.job_id]
        if not _outlasts(job, snap, time):
            continue
        for name, gpus in ((s.node, s.gpus), *s.more):
            assert not held & {(name, g) for g in gpus}, (s, r)
            if name in cpus:
                cpus[name] += job.resources.cpus or 0
    for n in snap.nodes:
        if n.cpus and n.name in cpus:
            assert cpus[n.name] <= n.cpus, (n.name, cpus, r)


@SETTINGS
@given(pools())
def test_the_wide_reservation_never_moves_later_for_a_backfilled_job(snap: Snapshot) -> None:
    """The same pass again with every start of the first running: the wide job reserves
    again, at its time or earlier (jobs ending by then are back by then, and the others keep
    off what it holds)."""
    found = _wide_reserved(snap)
    if found is None:
        return
    d, time = found
    jobs = {j.id: j for j in snap.pending}
    started = []
    for s in d.starts:
        job = jobs.pop(s.job_id)
        for name, gpus in ((s.node, s.gpus), *s.more):
            part = replace(job.resources, gpus=len(gpus))
            started.append(RunningJob(job.id, name, gpus, part, 0.0,
                                      time_limit_s=job.time_limit_s))  # fmt: skip
    again = decide(replace(snap, pending=(jobs[WIDE_ID],), running=(*snap.running, *started)), 0.0)
    assert again.starts == ()
    (r,) = again.reservations
    assert r.job_id == WIDE_ID and r.time <= time, (r, d.reservations[0])


@SETTINGS
@given(pools(), st.integers(1, 8), st.sampled_from([None, 4, 8]))
def test_place_beside_is_best_fit_on_the_spare_views(
    snap: Snapshot, gpus: int, cpus: int | None
) -> None:
    index = CountedIndex(snap, 0.0)
    wide = snap.pending[0].resources
    shadow = reserve_wide(
        WIDE_ID, wide, index.frees, index.releases(()), 0.0, snap.config.wide_placement
    )
    if shadow is None:
        return
    ask = res(gpus, cpus=cpus)
    expected = place([shadow.spare_of(f) for f in index.frees], ask)
    assert shadow.place_beside(index, ask) == expected
    if expected is not None:
        assert not set(expected.gpus) & set(dict(shadow.reservation.parts()).get(expected.node, ()))
