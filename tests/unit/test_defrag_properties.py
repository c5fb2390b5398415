"""Properties of defragmentation (policy/defrag.py) over random pools, replayed for a few
passes as the simulator does (preemptions applied at once, the pass decided again):

- a job is never preempted twice by defragmentation for the same waiting job (no ping-pong);
- every defragmentation victim is eligible (`may_preempt`), of no higher class than the job,
  on the named node, and with quotas never of another project within its quota;
- the victims are re-placeable: with the job on the named node, they fit at once on the free
  GPUs of the other nodes (checked here by an exhaustive search, not the policy's own code);
- the job then fits on the named node, and starts in the next pass.
"""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_builders import node, res
from test_defrag import apply

from gpupool.core.job import PRIORITY_CLASSES
from gpupool.core.project import Project
from gpupool.policy import PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.reasons import DefragCause
from gpupool.policy.snapshot import Decision, PolicyConfig
from gpupool.policy.status import Rule
from gpupool.policy.victim_cost import may_preempt

CLASSES = (PRIORITY_CLASSES["low"], PRIORITY_CLASSES["normal"], PRIORITY_CLASSES["high"])
PASSES = 6
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def pools(draw: st.DrawFn) -> Snapshot:
    """2-4 nodes of 4 or 8 GPUs, filled in part by 1-, 2- and 4-GPU jobs of random age,
    class, project and preemptibility (in half the pools, each node about half full); 1-3
    waiting jobs; quotas or not."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    nodes = tuple(node(f"n{i}", rnd.choice((4, 8))) for i in range(rnd.randint(2, 4)))
    running: list[RunningJob] = []
    next_id = 1
    fragmented = rnd.random() < 0.5  # each node about half full: the case defrag is for
    for n in nodes:
        free = list(range(len(n.gpus)))
        target = rnd.randint(1, len(free) // 2 + 1)  # GPUs left free
        while len(free) > target if fragmented else free and rnd.random() < 0.7:
            size = min(rnd.choice((1, 2, 2, 4)), len(free) - (target if fragmented else 0))
            held, free = tuple(free[:size]), free[size:]
            running.append(
                RunningJob(
                    next_id, n.name, held, res(size), rnd.choice((0.0, 0.0, 500.0, 900.0)),
                    priority=rnd.choice(CLASSES), project=rnd.choice("xy"),
                    time_limit_s=rnd.choice((None, 3600.0, 7200.0)),
                    preemptible=rnd.random() < 0.8, checkpointing=rnd.random() < 0.3,
                    restarts=rnd.choice((0, 0, 1, 3)),
                )
            )  # fmt: skip
            next_id += 1
    widest = max(len(n.gpus) for n in nodes)
    waiting = tuple(
        PendingJob(
            100 + i, res(rnd.randint(max(1, widest // 2), widest)), rnd.choice(CLASSES), 950.0 + i,
            project=rnd.choice("xy"), time_limit_s=rnd.choice((None, 1800.0)),
        )
        for i in range(rnd.randint(1, 3))
    )  # fmt: skip
    projects = {}
    if rnd.random() < 0.5:
        projects = {p: Project(p, quota=rnd.choice((0, 2, 4, 8))) for p in "xy"}
    return Snapshot(nodes, waiting, tuple(running), projects=projects)


def replaceable(snap: Snapshot, decision: Decision, cause: DefragCause, victims: set[int]) -> bool:
    """Whether the victims fit on the other nodes' free GPUs once this pass's starts run:
    an exhaustive search over which node each one takes."""
    free = {n.name: len(n.gpus) for n in snap.nodes}
    for r in snap.running:
        free[r.node] -= len(r.gpus)
    for s in decision.starts:
        free[s.node] -= len(s.gpus)
    free.pop(cause.node)
    sizes = sorted((len(r.gpus) for r in snap.running if r.id in victims), reverse=True)

    def search(i: int) -> bool:
        if i == len(sizes):
            return True
        for name, room in free.items():
            if room >= sizes[i]:
                free[name] -= sizes[i]
                if search(i + 1):
                    return True
                free[name] += sizes[i]
        return False

    return search(0)


def check_pass(snap: Snapshot, decision: Decision, now: float) -> dict[int, set[int]]:
    """The invariants of one pass's defragmentation; its victims by the job they are for."""
    by_job: dict[int, set[int]] = {}
    running = {r.id: r for r in snap.running}
    waiting = {p.id: p for p in snap.pending}
    for p in decision.preemptions:
        if isinstance(p.cause, DefragCause):
            by_job.setdefault(p.for_job_id, set()).add(p.job_id)
    for job_id, victims in by_job.items():
        job, status = waiting[job_id], decision.pending[job_id]
        cause = status.defrag
        assert status.rule is Rule.DEFRAGMENT and cause is not None
        assert set(status.jobs) == victims
        for v in (running[i] for i in victims):
            assert may_preempt(v, now, snap.config) and v.priority <= job.priority
            assert v.node == cause.node
            if snap.projects and v.project != job.project:
                quota = snap.projects[v.project].quota
                in_use = sum(len(r.gpus) for r in snap.running if r.project == v.project)
                in_use += sum(
                    len(s.gpus) for s in decision.starts if waiting[s.job_id].project == v.project
                )
                assert in_use - len(v.gpus) >= quota  # a borrower, not a job within quota
        node_gpus = {n.name: len(n.gpus) for n in snap.nodes}[cause.node]
        held = sum(len(r.gpus) for r in snap.running if r.node == cause.node)
        free_there = node_gpus - held + cause.freed
        assert free_there >= job.resources.gpus
        assert replaceable(snap, decision, cause, victims)
    assert len(by_job) <= 1  # one job per pass
    return by_job


@SETTINGS
@given(pools(), st.lists(st.sampled_from((0.0, 0.0, 300.0, 600.0)), min_size=PASSES))
def test_no_job_is_moved_twice_for_the_same_job_and_victims_fit_elsewhere(
    snap: Snapshot, steps: list[float]
) -> None:
    now, moved = 1000.0, set()
    for step in steps[:PASSES]:
        decision = decide(snap, now)
        for job_id, victims in check_pass(snap, decision, now).items():
            for v in victims:
                assert (v, job_id) not in moved, f"job {v} moved twice for job {job_id}"
                moved.add((v, job_id))
            # The replay applies the preemptions and decides again at once: the job starts
            # on the node it was made room on.
            again = apply(snap, decision, now)
            follow = decide(again, now)
            assert {s.job_id: s.node for s in follow.starts}.get(job_id) == (
                decision.pending[job_id].defrag.node  # type: ignore[union-attr]
            )
        snap = apply(snap, decision, now)
        now += step


@SETTINGS
@given(pools())
def test_off_nothing_is_moved(snap: Snapshot) -> None:
    off = replace(snap, config=PolicyConfig(defragment=False))
    assert not any(isinstance(p.cause, DefragCause) for p in decide(off, 1000.0).preemptions)
