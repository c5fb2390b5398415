"""Preemption by priority class and where it pays (policy/class_preemption.py), in `decide`:
which jobs are stopped, for whom, and which never are (issue 33, item 2)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import node, res

from gpupool.core.project import Project
from gpupool.policy import Code, PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.reasons import ClassCause, PaysCause, ReclaimCause
from gpupool.policy.render import preemption_text, status_text
from gpupool.policy.snapshot import PolicyConfig
from gpupool.policy.status import Rule

LOW, NORMAL, HIGH = 100, 200, 300
NOW = 10_000.0
BOX = (node("box", 4),)


def running(
    jid: int, gpus: list[int], *, prio: int = LOW, project: str = "a", ran: float = 1000.0,
    **kw: object,
) -> RunningJob:  # fmt: skip
    return RunningJob(
        id=jid, node="box", gpus=tuple(gpus), resources=res(len(gpus)),
        start_time=NOW - ran, priority=prio, project=project, time_limit_s=86400.0, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def waiting(
    jid: int, gpus: int, *, prio: int = HIGH, project: str = "a", limit: float = 3600.0
) -> PendingJob:
    return PendingJob(
        id=jid, resources=res(gpus), priority=prio, submit_time=NOW - 10.0,
        project=project, time_limit_s=limit,
    )  # fmt: skip


def decision(running_jobs, pending, projects=(), config=PolicyConfig()):  # type: ignore[no-untyped-def]
    snap = Snapshot(
        nodes=BOX, pending=tuple(pending), running=tuple(running_jobs), config=config,
        projects={p.name: p for p in projects},
    )  # fmt: skip
    return decide(snap, NOW)


def preempted(d) -> dict[int, int]:  # type: ignore[no-untyped-def]
    return {p.job_id: p.for_job_id for p in d.preemptions}


def test_a_higher_class_preempts_the_lower_class_job_it_needs_and_says_so() -> None:
    d = decision([running(11, [0, 1], ran=2000.0), running(12, [2, 3], ran=500.0)], [waiting(1, 2)])
    assert preempted(d) == {12: 1}  # the one that loses least work
    status = d.pending[1]
    assert (status.code, status.rule, status.jobs) == (Code.PRIORITY, Rule.CLASS_PREEMPTION, (12,))
    assert "waiting for job 12 to stop" in status_text(status)
    (p,) = d.preemptions
    assert isinstance(p.cause, ClassCause)
    assert "priority class high" in preemption_text(p)


def test_no_preemption_before_the_minimum_run_time_or_of_a_non_preemptible_job() -> None:
    assert not decision([running(11, [0, 1, 2, 3], ran=299.0)], [waiting(1, 1)]).preemptions
    fixed = running(11, [0, 1, 2, 3], preemptible=False)
    assert not decision([fixed], [waiting(1, 1)]).preemptions


def test_a_project_s_preempt_min_runtime_protects_its_jobs_that_long() -> None:
    jobs, want = [running(11, [0, 1, 2, 3], ran=1000.0)], [waiting(1, 1)]
    slow = Project("a", preempt_min_runtime_s=3600.0)
    assert not decision(jobs, want, [slow]).preemptions
    quick = Project("a", preempt_min_runtime_s=600.0)
    assert preempted(decision(jobs, want, [quick])) == {11: 1}


def test_another_project_within_its_quota_is_never_preempted_a_borrower_is() -> None:
    projects = [Project("a", quota=1), Project("b", quota=2)]
    inside = [running(11, [0, 1], project="b"), running(12, [2, 3], project="a")]
    # b holds 2 = its quota: only a's own job may go
    assert preempted(decision(inside, [waiting(1, 2)], projects)) == {12: 1}
    borrowing = [
        running(11, [0, 1], project="b", ran=500.0),
        running(13, [2], project="b", ran=9000.0),  # b holds 3 > 2: one GPU borrowed
        running(12, [3], project="a", ran=100.0),  # a's own, too young
    ]
    # only b's GPUs above its quota may go, though job 11 would lose less work
    assert preempted(decision(borrowing, [waiting(1, 1)], projects)) == {13: 1}
    # a job borrowing in part is not taken whole: it would put b under its quota
    half = [running(11, [0, 1, 2], project="b"), running(12, [3], project="a", ran=100.0)]
    assert not decision(half, [waiting(1, 3)], projects).preemptions


def test_the_same_class_preempts_only_where_it_pays_and_only_jobs_that_checkpoint() -> None:
    same = [running(11, [0, 1, 2, 3], prio=NORMAL)]
    short = waiting(1, 1, prio=NORMAL, limit=600.0)
    assert not decision(same, [short]).preemptions
    # one GPU each: a stop loses 600 s since the last checkpoint, within the 900 GPU-s bound
    saves = [running(11 + g, [g], prio=NORMAL, checkpointing=True) for g in range(4)]
    d = decision(saves, [short])
    assert preempted(d) == {11: 1}
    assert d.pending[1].rule is Rule.PAYS_PREEMPTION
    assert isinstance(d.preemptions[0].cause, PaysCause)
    long = waiting(1, 1, prio=NORMAL, limit=86400.0)  # would not gain 10x: no stop
    assert not decision(saves, [long]).preemptions


def test_a_job_requeued_often_enough_is_left_to_finish() -> None:
    worn = [running(11, [0, 1, 2, 3], restarts=3)]
    assert not decision(worn, [waiting(1, 1)]).preemptions
    off = PolicyConfig(preempt_lower_classes=False)
    assert not decision([running(11, [0, 1, 2, 3])], [waiting(1, 1)], config=off).preemptions


# --- invariants -------------------------------------------------------------------------


@st.composite
def pools(draw):  # type: ignore[no-untyped-def]
    quotas = {p: draw(st.sampled_from([0.0, 1.0, 2.0, 4.0])) for p in ("a", "b")}
    mins = {p: draw(st.sampled_from([None, 0.0, 900.0])) for p in ("a", "b")}
    projects = [Project(p, quota=quotas[p], preempt_min_runtime_s=mins[p],
                        reclaim_min_runtime_s=draw(st.sampled_from([None, 600.0])))
                for p in ("a", "b")]  # fmt: skip
    nodes = (node("n0", 4), node("n1", 4))
    jobs: list[RunningJob] = []
    jid = 100
    for n in nodes:
        free = list(range(4))
        while free and draw(st.booleans()):
            k = draw(st.integers(1, len(free)))
            take, free = free[:k], free[k:]
            jobs.append(RunningJob(
                id=jid, node=n.name, gpus=tuple(take), resources=res(k),
                start_time=NOW - draw(st.sampled_from([10.0, 400.0, 1000.0, 5000.0])),
                priority=draw(st.sampled_from([LOW, NORMAL, HIGH])),
                project=draw(st.sampled_from(["a", "b"])), time_limit_s=86400.0,
                preemptible=draw(st.booleans()), checkpointing=draw(st.booleans()),
                restarts=draw(st.integers(0, 3)),
            ))  # fmt: skip
            jid += 1
    pending = [
        PendingJob(id=i, resources=res(draw(st.integers(1, 4))),
                   priority=draw(st.sampled_from([LOW, NORMAL, HIGH])), submit_time=NOW - 60.0,
                   project=draw(st.sampled_from(["a", "b"])),
                   time_limit_s=draw(st.sampled_from([300.0, 3600.0])))
        for i in range(1, draw(st.integers(1, 5)) + 1)
    ]  # fmt: skip
    return Snapshot(nodes=nodes, pending=tuple(pending), running=tuple(jobs),
                    projects={p.name: p for p in projects})  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(pools())
def test_within_quota_only_a_higher_class_of_its_own_project_and_never_too_early(
    snap: Snapshot,
) -> None:
    d = decide(snap, NOW)
    by_id = {r.id: r for r in snap.running}
    pending = {p.id: p for p in snap.pending}
    # A project's GPUs once the pass is done: its running jobs and the jobs it starts now.
    # The guarantee is the project's: a job of a project that this pass's starts take past
    # its quota may go (the project keeps its quota without it).
    in_use: dict[str, float] = {}
    for r in snap.running:
        in_use[r.project] = in_use.get(r.project, 0.0) + len(r.gpus)
    for s in d.starts:
        started = pending[s.job_id]
        in_use[started.project] = in_use.get(started.project, 0.0) + len(s.gpus)
    config = snap.config
    for p in d.preemptions:
        victim, ahead = by_id[p.job_id], pending[p.for_job_id]
        project = snap.projects[victim.project]
        ran = NOW - victim.start_time
        assert victim.preemptible
        if in_use[victim.project] <= project.quota:  # within its quota
            assert isinstance(p.cause, ClassCause | PaysCause), p
            assert ahead.project == victim.project and ahead.priority >= victim.priority
        if isinstance(p.cause, ReclaimCause):
            assert ran >= (project.reclaim_min_runtime_s or 0.0)
        else:
            floor = project.preempt_min_runtime_s
            assert ran >= (config.min_runtime_s if floor is None else floor), p
            assert victim.restarts < config.preempt_max_restarts


def test_the_config_turns_each_rule_off() -> None:
    base = [running(11, [0, 1, 2, 3], prio=NORMAL, checkpointing=True)]
    off = replace(PolicyConfig(), preempt_where_it_pays=False)
    assert not decision(base, [waiting(1, 1, prio=NORMAL, limit=600.0)], config=off).preemptions
