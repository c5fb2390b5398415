"""Drained GPUs in the pass (policy/drains.py): no job starts on one, whatever the stage that
would give it (placement, reclaim, class preemption, defragmentation), a job still running on
one keeps its project's count and is nobody's victim, and a job only drained GPUs could run
waits with `Drained`, rendered for `why`. Properties over random snapshots, with and without
quotas, and a random drained set."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from policy_builders import node, pending, running
from test_policy_properties import SETTINGS
from test_policy_properties import snapshots as plain_snapshots
from test_policy_quota_properties import snapshots as quota_snapshots

from gpupool.core.project import Project
from gpupool.policy import Code, Snapshot, decide
from gpupool.policy.drains import DrainCheck, with_drains
from gpupool.policy.quota import QuotaBook
from gpupool.policy.render import status_text
from gpupool.policy.status import Rule

NOW = 60.0


def _drained(snap: Snapshot, seed: int, share: float) -> frozenset[tuple[str, int]]:
    rnd = random.Random(seed)
    return frozenset((n.name, g.index) for n in snap.nodes for g in n.gpus if rnd.random() < share)


@st.composite
def drained_snapshots(draw: st.DrawFn) -> Snapshot:
    snap = draw(st.one_of(plain_snapshots(), quota_snapshots()))
    share = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
    return replace(snap, drained=_drained(snap, draw(st.integers(0, 2**32 - 1)), share))


@SETTINGS
@given(drained_snapshots())
def test_no_job_starts_on_a_drained_gpu_and_no_victim_holds_one(snap: Snapshot) -> None:
    d = decide(snap, NOW)
    for s in d.starts:
        for node_name, gpus in ((s.node, s.gpus), *s.more):
            assert not {(node_name, g) for g in gpus} & snap.drained, (s, snap.drained)
    on_drained = {r.id for r in snap.running if any((r.node, g) in snap.drained for g in r.gpus)}
    assert not {p.job_id for p in d.preemptions} & on_drained
    assert all(p.job_id >= 0 for p in d.preemptions)  # a drain's holder is never a victim


@SETTINGS
@given(drained_snapshots())
def test_drained_exactly_when_the_pool_less_its_drained_gpus_could_never_run_the_job(
    snap: Snapshot,
) -> None:
    d = decide(snap, NOW)
    check = DrainCheck(snap)
    for job in snap.pending:
        status = d.pending.get(job.id)
        if status is None:
            continue
        if status.code is Code.DRAINED:
            assert status.rule is Rule.DRAINED and status.short is not None
            assert "only drained GPUs could run it" in status_text(status)
            assert check.status(job, replace(status, code=Code.RESOURCES)) is not None
        elif status.code is Code.RESOURCES:
            assert check.status(job, status) is None


@SETTINGS
@given(drained_snapshots())
def test_a_drain_changes_no_projects_gpus_in_use(snap: Snapshot) -> None:
    """A whole-GPU job's drained GPUs count for its project through the holder, so quotas
    read the same use with or without drains (an idle drained GPU counts for nobody's)."""
    before = QuotaBook(snap).in_use
    after = QuotaBook(with_drains(snap, NOW)).in_use
    for project, used in before.items():
        assert after.get(project, 0.0) == used or _shared_on_drained(snap, project)


def _shared_on_drained(snap: Snapshot, project: str) -> bool:
    return any(
        r.project == project and r.resources.fractional and (r.node, g) in snap.drained
        for r in snap.running
        for g in r.gpus
    )


def test_an_idle_drained_gpu_is_skipped_and_a_job_that_needs_it_waits_drained() -> None:
    box = node("box", 4)
    snap = Snapshot(
        (box,),
        pending=(pending(1, 1), pending(2, 4), pending(3, 3)),
        drained=frozenset({("box", 0)}),
    )
    d = decide(snap, NOW)
    assert [s.job_id for s in d.starts] == [1, 3] or [s.job_id for s in d.starts] == [1]
    assert d.pending[2].code is Code.DRAINED
    words = status_text(d.pending[2])
    assert "only drained GPUs could run it" in words and "gpupool resume" in words
    assert 0 not in {g for s in d.starts for g in s.gpus}


def test_a_job_running_on_a_drained_gpu_runs_on_and_its_gpu_stays_out_after() -> None:
    box = node("box", 2)
    job = running(7, "box", (0,))
    drained = frozenset({("box", 0)})
    d = decide(Snapshot((box,), pending=(pending(1, 1), pending(2, 1)), running=(job,),
                        drained=drained), NOW)  # fmt: skip
    assert [(s.job_id, s.gpus) for s in d.starts] == [(1, (1,))]
    assert not d.preemptions
    # Job 7 ended, job 1 runs on GPU 1: the next pass still keeps GPU 0 out.
    d = decide(Snapshot((box,), pending=(pending(2, 1),), running=(running(1, "box", (1,)),),
                        drained=drained), NOW)  # fmt: skip
    assert not d.starts and d.pending[2].code is Code.RESOURCES


def test_reclaim_never_takes_a_borrower_on_a_drained_gpu() -> None:
    """Project a is under its quota; b borrows both GPUs, one of them drained: reclaim may
    take only the job on the GPU that is not drained, and its claim lands there."""
    box = node("box", 2)
    projects = {"a": Project("a", quota=1), "b": Project("b", quota=0)}
    # The job on the drained GPU is the youngest: without the drain it would be the victim.
    on_drained = replace(running(10, "box", (0,)), project="b", start_time=10.0)
    elsewhere = replace(running(11, "box", (1,)), project="b")
    snap = Snapshot(
        (box,),
        pending=(replace(pending(1, 1), project="a"),),
        running=(on_drained, elsewhere),
        projects=projects,
        drained=frozenset({("box", 0)}),
    )
    d = decide(snap, NOW)
    assert [p.job_id for p in d.preemptions] == [11]


def test_a_drain_of_every_gpu_makes_each_gpu_job_wait_drained_and_cpu_jobs_run() -> None:
    box = node("box", 2, cpus=8)
    snap = Snapshot(
        (box,),
        pending=(pending(1, 1), pending(2, 0, cpus=1)),
        drained=frozenset({("box", 0), ("box", 1)}),
    )
    d = decide(snap, NOW)
    assert [s.job_id for s in d.starts] == [2]
    assert d.pending[1].code is Code.DRAINED


def test_a_drained_wait_carries_no_reservation() -> None:
    """A job only drained GPUs could run has no start time a reservation could name: its
    status has none, even when it heads the queue (it was sent with `time: null`)."""
    box = node("box", 4)
    busy = running(5, "box", (1, 2))
    snap = Snapshot(
        (box,), pending=(pending(1, 4),), running=(busy,), drained=frozenset({("box", 0)})
    )
    status = decide(snap, NOW).pending[1]
    assert status.code is Code.DRAINED and status.reserved is None
