"""Defragmentation (policy/defrag.py): a job that fits in the pool's free GPUs but on no one
node has preemptible jobs of one node requeued onto the others, and starts within two passes
(issue 33, item 3)."""

from __future__ import annotations

from dataclasses import replace

from policy_builders import node, pending, res

from gpupool.core.job import PRIORITY_CLASSES
from gpupool.core.project import Project
from gpupool.policy import PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.reasons import DefragCause
from gpupool.policy.render import preemption_text, status_text
from gpupool.policy.snapshot import Decision, PolicyConfig
from gpupool.policy.status import Code, Rule

NOW = 10_000.0
HOUR = 3600.0


def job(
    job_id: int,
    node_name: str,
    gpus: tuple[int, ...],
    *,
    started: float = NOW - HOUR,
    prio: int = PRIORITY_CLASSES["normal"],
    project: str = "default",
    preemptible: bool = True,
    checkpointing: bool = False,
    restarts: int = 0,
) -> RunningJob:
    return RunningJob(
        id=job_id,
        node=node_name,
        gpus=gpus,
        resources=res(len(gpus)),
        start_time=started,
        priority=prio,
        project=project,
        time_limit_s=24 * HOUR,
        preemptible=preemptible,
        checkpointing=checkpointing,
        restarts=restarts,
    )


def wide(job_id: int = 10, gpus: int = 8, **kw: object) -> PendingJob:
    return replace(pending(job_id, gpus, t=NOW - 60), time_limit_s=HOUR, **kw)  # type: ignore[arg-type]


def fragmented(**kw: object) -> Snapshot:
    """The issue's case: two 8-GPU nodes, 4 GPUs free on each (two 2-GPU preemptible jobs on
    each; node b's are younger), an 8-GPU job waiting, no quotas."""
    running = (
        job(1, "a", (0, 1), started=NOW - 4 * HOUR),
        job(2, "a", (2, 3), started=NOW - 4 * HOUR),
        job(3, "b", (0, 1), started=NOW - 1200),
        job(4, "b", (2, 3), started=NOW - 1200),
    )
    return Snapshot((node("a"), node("b")), (wide(),), running, **kw)  # type: ignore[arg-type]


def apply(snap: Snapshot, decision: Decision, now: float) -> Snapshot:
    """The replay's step: victims requeued (one more restart), starts running."""
    stopped = {p.job_id for p in decision.preemptions}
    requeued = tuple(
        PendingJob(
            r.id, r.resources, r.priority, r.start_time, project=r.project,
            preemptible=r.preemptible, restarts=r.restarts + 1, time_limit_s=r.time_limit_s,
        )
        for r in snap.running
        if r.id in stopped
    )  # fmt: skip
    by_id = {p.id: p for p in (*snap.pending, *requeued)}
    started = tuple(
        RunningJob(
            s.job_id, s.node, s.gpus, by_id[s.job_id].resources, now,
            priority=by_id[s.job_id].priority, project=by_id[s.job_id].project,
            time_limit_s=by_id[s.job_id].time_limit_s, restarts=by_id[s.job_id].restarts,
        )
        for s in decision.starts
    )  # fmt: skip
    gone = {s.job_id for s in decision.starts}
    return replace(
        snap,
        pending=tuple(p for p in by_id.values() if p.id not in gone),
        running=tuple(r for r in snap.running if r.id not in stopped) + started,
    )


def test_the_fragmented_wide_job_starts_within_two_passes_without_quotas() -> None:
    snap = fragmented()
    first = decide(snap, NOW)
    assert not first.starts
    # The youngest jobs (least work lost) of one node, moved: node b's two 2-GPU jobs.
    assert sorted(p.job_id for p in first.preemptions) == [3, 4]
    assert {p.for_job_id for p in first.preemptions} == {10}
    status = first.pending[10]
    assert (status.code, status.rule, status.jobs) == (Code.RESOURCES, Rule.DEFRAGMENT, (3, 4))
    assert status.defrag == DefragCause("b", 8, 4, 2 * 2 * 1200.0, 8, 4)
    assert 10 not in first.estimated_start  # not the reservation's hours away any more
    second = decide(apply(snap, first, NOW), NOW)
    where = {s.job_id: s.node for s in second.starts}
    assert where == {10: "b", 3: "a", 4: "a"}
    assert not second.preemptions


def test_the_status_and_the_victims_cause_say_it_in_words() -> None:
    first = decide(fragmented(), NOW)
    words = status_text(first.pending[10])
    assert words.startswith("preempting jobs 3, 4 on node b to make room for its 8 GPUs")
    assert "8 GPUs are free across the pool but at most 4 on one node" in words
    cause = preemption_text(first.preemptions[0])
    assert cause.startswith("defragmenting node b for job 10 (8 GPUs)")
    assert "4,800 GPU-seconds of work lost" in cause


def test_off_it_waits_for_its_reservation() -> None:
    off = decide(fragmented(config=PolicyConfig(defragment=False)), NOW)
    assert not off.preemptions
    assert off.pending[10].rule is Rule.NO_FIT
    assert 10 in off.estimated_start


def test_a_job_that_checkpoints_loses_less_and_goes_first() -> None:
    snap = fragmented()
    running = tuple(
        replace(r, checkpointing=True) if r.node == "a" else r for r in snap.running
    )  # node a's jobs ran 4 h but checkpoint: 2 x 600 s each lost, less than b's 2 x 1200 s
    found = decide(replace(snap, running=running), NOW)
    assert sorted(p.job_id for p in found.preemptions) == [1, 2]
    assert found.pending[10].defrag is not None and found.pending[10].defrag.node == "a"


def test_victims_are_chosen_fewest_gpus_stopped() -> None:
    """Node a frees 3 more with one 4-GPU job, node b 4 more with four of its five 1-GPU
    jobs, all of the same age (node c takes either): equal work lost, as many GPUs, then the
    fewest jobs: a; and on b no victim too many (fill-back)."""
    running = (
        job(1, "a", (0, 1, 2, 3), started=NOW - 1000),
        *(job(i, "b", (i - 2,), started=NOW - 1000) for i in range(2, 7)),
        job(7, "c", (0, 1, 2, 3), preemptible=False),
    )
    nodes = (node("a"), node("b"), node("c"))
    found = decide(Snapshot(nodes, (wide(gpus=7),), running), NOW)
    assert [p.job_id for p in found.preemptions] == [1]
    # Without node a's job, node b's: four of them (4 x 1,000 GPU-s), not five.
    spared = tuple(replace(r, preemptible=False) if r.id == 1 else r for r in running)
    found = decide(Snapshot(nodes, (wide(gpus=7),), spared), NOW)
    assert len(found.preemptions) == 4
    assert found.pending[10].defrag == DefragCause("b", 7, 4, 4000.0, 11, 4)


def test_never_a_job_that_is_young_not_preemptible_or_of_a_higher_class() -> None:
    snap = fragmented()
    young = replace(snap, running=tuple(replace(r, start_time=NOW - 60) for r in snap.running))
    assert not decide(young, NOW).preemptions  # min_runtime_s: 300 s by default
    kept = replace(snap, running=tuple(replace(r, preemptible=False) for r in snap.running))
    assert not decide(kept, NOW).preemptions
    high = PRIORITY_CLASSES["high"]
    above = replace(snap, running=tuple(replace(r, priority=high) for r in snap.running))
    assert not decide(above, NOW).preemptions
    worn = replace(snap, running=tuple(replace(r, restarts=3) for r in snap.running))
    assert not decide(worn, NOW).preemptions  # preempt_max_restarts: 3 by default


def test_a_higher_class_waiting_job_may_move_lower_ones() -> None:
    snap = fragmented()
    high = replace(snap.pending[0], priority=PRIORITY_CLASSES["high"])
    found = decide(replace(snap, pending=(high,)), NOW)
    assert sorted(p.job_id for p in found.preemptions) == [3, 4]


def test_victims_that_fit_nowhere_else_are_not_stopped() -> None:
    """Node a has 4 free and a 4-GPU job; b and c 2 free each: 8 free in the pool, but the
    4-GPU job would find no node to restart on: that would be a loss, not a migration."""
    running = (
        job(1, "a", (0, 1, 2, 3)),
        job(2, "b", tuple(range(6)), preemptible=False),
        job(3, "c", tuple(range(6)), preemptible=False),
    )
    snap = Snapshot((node("a"), node("b"), node("c")), (wide(),), running)
    found = decide(snap, NOW)
    assert not found.preemptions
    assert found.pending[10].rule is Rule.NO_FIT


def test_not_when_the_pool_lacks_the_gpus() -> None:
    snap = fragmented()
    more = replace(snap, pending=(wide(gpus=9),))
    found = decide(more, NOW)
    assert not found.preemptions


def test_gpu_types_count_only_the_matching_gpus() -> None:
    """4 free H100s on each of two nodes and 8 free A100s elsewhere: an 8 x H100 job moves
    the 2-GPU jobs of one H100 node onto the A100 node, if they ask for no type."""
    h100 = "H100-80GB"
    running = (
        job(1, "a", (0, 1), started=NOW - 900),
        job(2, "a", (2, 3), started=NOW - 900),
        job(3, "b", (0, 1)),
        job(4, "b", (2, 3)),
        job(5, "c", tuple(range(8)), preemptible=False),
    )
    nodes = (node("a", model=h100), node("b", model=h100), node("c", 16))
    waiting = replace(wide(), resources=res(8, gpu_type=h100))
    found = decide(Snapshot(nodes, (waiting,), running), NOW)
    assert sorted(p.job_id for p in found.preemptions) == [1, 2]
    assert found.pending[10].defrag == DefragCause("a", 8, 4, 2 * 2 * 900.0, 8, 4)


def test_with_quotas_only_borrowers_and_its_own_project() -> None:
    """Project x runs node b's jobs within its quota (4): never moved for project y's job;
    once x borrows (quota 2), they may be."""
    snap = fragmented()
    running = tuple(
        replace(r, project="x") if r.node == "b" else replace(r, project="y") for r in snap.running
    )
    waiting = replace(snap.pending[0], project="y")
    within = {"x": Project("x", quota=4), "y": Project("y", quota=4)}
    found = decide(replace(snap, running=running, pending=(waiting,), projects=within), NOW)
    # Node b's jobs are x's, within its quota; node a's are y's own: those move.
    assert sorted(p.job_id for p in found.preemptions) == [1, 2]
    borrowing = {"x": Project("x", quota=0), "y": Project("y", quota=8)}
    found = decide(replace(snap, running=running, pending=(waiting,), projects=borrowing), NOW)
    assert sorted(p.job_id for p in found.preemptions) == [3, 4]


def test_with_quotas_a_project_within_its_quota_keeps_its_jobs() -> None:
    snap = fragmented()
    running = tuple(replace(r, project="x") for r in snap.running)
    waiting = replace(snap.pending[0], project="y")
    projects = {"x": Project("x", quota=8), "y": Project("y", quota=0)}
    found = decide(replace(snap, running=running, pending=(waiting,), projects=projects), NOW)
    assert not found.preemptions


def test_the_replay_profiles_defragment_too() -> None:
    for order in ("fifo", "sjf", "las"):
        found = decide(fragmented(config=PolicyConfig(order=order)), NOW)
        assert sorted(p.job_id for p in found.preemptions) == [3, 4], order
