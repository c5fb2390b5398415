"""Named policy profiles (policy/profiles.py) through the one `decide()`: the queue orders of
policy/orders.py, strict order without backfill, and preemption by order
(policy/priority_preemption.py). Table-driven cases, then properties over random clusters."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_builders import node, pending, running

from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy import PROFILES, Code, Decision, Snapshot, decide, profile
from gpupool.policy.ordering import rank
from gpupool.policy.orders import sort_key
from gpupool.policy.render import preemption_text, status_text
from gpupool.policy.snapshot import PendingJob, PolicyConfig, RunningJob, WidePlacement

NOW = 1000.0


def hinted(job_id: int, gpus: int, hint: float | None, *, t: float | None = None,
           attained: float = 0.0, project: str = "default", limit: float | None = None) -> PendingJob:  # fmt: skip
    job = pending(job_id, gpus, t=t)
    return replace(job, runtime_hint_s=hint, attained_s=attained, project=project,
                   time_limit_s=limit)  # fmt: skip


def ran(job_id: int, node_name: str, gpus: range | tuple[int, ...], *, hint: float | None = None,
        start: float = 0.0, project: str = "default") -> RunningJob:  # fmt: skip
    job = running(job_id, node_name, tuple(gpus))
    return replace(job, runtime_hint_s=hint, start_time=start, project=project, priority=200)


@dataclass(frozen=True)
class Case:
    name: str
    snapshot: Snapshot
    config: PolicyConfig
    check: Callable[[Decision], None]


def started(d: Decision) -> set[int]:
    return {s.job_id for s in d.starts}


def _fifo_head_blocks(d: Decision) -> None:
    assert started(d) == set()
    assert d.pending[2].code is Code.RESOURCES and d.reservations[0].job_id == 2
    assert 2 in d.estimated_start  # the head keeps its reservation and estimate
    assert d.pending[3].code is Code.PRIORITY
    assert status_text(d.pending[3]).startswith("waiting behind job 2, the first in line")


def _preempts(victim: int, for_job: int, *words: str) -> Callable[[Decision], None]:
    def check(d: Decision) -> None:
        assert [(p.job_id, p.for_job_id) for p in d.preemptions] == [(victim, for_job)]
        for word in words:
            assert word in preemption_text(d.preemptions[0])
        status = d.pending[for_job]
        assert status.code is Code.PRIORITY and f"job {victim}" in status_text(status)

    return check


def _no_preemption(d: Decision) -> None:
    assert d.preemptions == ()


# One node of 8 GPUs, 6 held until the default limit; job 2 (4 GPUs) is first in line, job 3
# (1 GPU, 60 s) fits now and ends long before job 2 could start. Job 1 is of the waiting jobs'
# class (`ran`), so no class preemption (policy/class_preemption.py) makes room for job 2.
BLOCKED = Snapshot(
    (node("a", 8),),
    pending=(pending(2, 4), hinted(3, 1, None, limit=60.0)),
    running=(ran(1, "a", range(6)),),
)
# srtf: a 4-GPU job with 9000 s left, a waiting one with 120 s in all.
SRTF = Snapshot(
    (node("a", 4),),
    pending=(hinted(2, 4, 120.0, t=500.0),),
    running=(ran(1, "a", range(4), hint=10_000.0),),
)
# las: 4 GPUs for 1000 s = 4000 GPU-s, past the first threshold (3600): level 1.
LAS_CROSSED = Snapshot(
    (node("a", 4),), pending=(pending(2, 4, t=500.0),), running=(ran(1, "a", range(4)),)
)
# las: 1 GPU for 100 s, level 0 like the fresh job, which was submitted before it started.
LAS_SAME = Snapshot(
    (node("a", 1),),
    pending=(pending(2, 1, t=10.0),),
    running=(ran(1, "a", range(1), start=900.0),),
)
# Two nodes: on "a" 2 GPUs free and a 2-GPU victim would do; on "b" it takes two victims.
TWO_NODES = Snapshot(
    (node("a", 4), node("b", 4)),
    pending=(hinted(9, 4, 10.0, t=900.0),),
    running=(
        ran(1, "a", (0, 1), hint=90_000.0),
        ran(2, "b", (0, 1), hint=50_000.0),
        ran(3, "b", (2, 3), hint=50_000.0),
    ),
)
# srtf: job 1 (3 GPUs, 50 s left) is kept; job 2 (2 GPUs) does not fit in the budget left
# (1 GPU), so it is not kept and preempts nobody, though job 4 ranks behind it.
OVER_BUDGET = Snapshot(
    (node("a", 4),),
    pending=(hinted(2, 2, 100.0, t=500.0),),
    running=(ran(1, "a", range(3), hint=1050.0), ran(4, "a", (3,), hint=90_000.0)),
)
# srtf: job 2 (8 GPUs, 20 s) is first in line but job 1 (4 GPUs, 10 s left) is kept, so no
# victims can make room for job 2: it holds the reservation, and job 3 (2 GPUs, 30 s), behind
# it, stops nobody, though job 4 (90,000 s left) ranks behind both.
BEHIND_HEAD = Snapshot(
    (node("a", 8),),
    pending=(hinted(2, 8, 20.0, t=500.0), hinted(3, 2, 30.0, t=600.0)),
    running=(ran(1, "a", range(4), hint=1010.0), ran(4, "a", range(4, 8), hint=91_000.0)),
)
QUOTAS = Snapshot(
    (node("a", 4),),
    pending=(replace(pending(2, 2), project="x"),),
    projects={"x": Project("x", quota=1.0, limit=1.0)},
)

CASES = [
    Case("fifo: a small job that fits waits behind the head", BLOCKED, PROFILES["fifo"],
         _fifo_head_blocks),
    Case("fifo-backfill: the small job starts around the head", BLOCKED, PROFILES["fifo-backfill"],
         lambda d: started(d) == {3} or pytest.fail(str(d))),
    Case("srtf preempts a long running job for a short pending one", SRTF,
         PROFILES["srtf-oracle"], _preempts(1, 2, "120s left", "9000s left")),
    Case("srtf: no preemption before min_runtime_s", SRTF,
         replace(PROFILES["srtf-oracle"], min_runtime_s=3600.0), _no_preemption),
    Case("srtf: the node where the fewest victims make it fit", TWO_NODES,
         PROFILES["srtf-oracle"], _preempts(1, 9)),
    Case("srtf: a job past the GPU budget is not kept and preempts nobody", OVER_BUDGET,
         PROFILES["srtf-oracle"], _no_preemption),
    Case("srtf: no preemption for a job behind a blocked head of the line", BEHIND_HEAD,
         PROFILES["srtf-oracle"], _no_preemption),
    Case("fifo: a job that can never run says so, even behind the head",
         replace(BLOCKED, pending=(*BLOCKED.pending, pending(4, 16))), PROFILES["fifo"],
         lambda d: d.pending[4].code is Code.UNSATISFIABLE or pytest.fail(str(d))),
    Case("las preempts a job past a threshold for a fresh one", LAS_CROSSED, PROFILES["las"],
         _preempts(1, 2, "level 0", "level 1, 4000 GPU-s")),
    Case("las: no preemption within a level", LAS_SAME, PROFILES["las"], _no_preemption),
    Case("use_quotas off ignores the projects' quotas and limits", QUOTAS, PROFILES["fifo"],
         lambda d: started(d) == {2} or pytest.fail(str(d))),
    Case("the default profile enforces them (2 GPUs above a limit of 1: never)", QUOTAS,
         PROFILES["default"],
         lambda d: d.pending[2].code is Code.QUOTA_NEVER_FITS or pytest.fail(str(d))),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_profile_case(case: Case) -> None:
    case.check(decide(replace(case.snapshot, config=case.config), NOW))


def _order(config: PolicyConfig, jobs: tuple[PendingJob, ...], **snap: object) -> list[int]:
    snapshot = Snapshot((node("a", 8),), pending=jobs, config=config, **snap)  # type: ignore[arg-type]
    return [j.id for j in rank(snapshot, NOW)[0]]


def test_sjf_orders_by_hint_unknown_last_class_first() -> None:
    jobs = (hinted(1, 1, 300.0), hinted(2, 1, None), hinted(3, 1, 100.0), hinted(4, 1, 200.0),
            replace(hinted(5, 1, 900.0), priority=300))  # fmt: skip
    assert _order(PROFILES["sjf-oracle"], jobs) == [5, 3, 4, 1, 2]
    # And the shortest takes the one free GPU.
    snap = Snapshot((node("a", 1),), pending=jobs[:4], config=PROFILES["sjf-oracle"])
    assert started(decide(snap, NOW)) == {3}


def test_srtf_orders_by_time_left_and_las_by_level_then_submit_time() -> None:
    jobs = (hinted(1, 1, 500.0), hinted(2, 1, 900.0, attained=800.0), hinted(3, 2, None))
    assert _order(PROFILES["srtf-oracle"], jobs) == [2, 1, 3]
    # las: job 4 has 2 x 2000 = 4000 GPU-s (level 1); 5 and 6 are at level 0, FIFO.
    las = (
        hinted(4, 2, None, attained=2000.0),
        hinted(6, 1, None),
        hinted(5, 1, None, attained=3000.0),
    )
    assert _order(PROFILES["las"], las) == [5, 6, 4]


def test_drf_interleaves_projects_by_share() -> None:
    """Project a holds 4 GPUs, b none: b's jobs come first until b holds 4 too, then the two
    alternate (ties to the first name), each project in submit order."""
    jobs = tuple(hinted(i, 1, None, project="a") for i in (1, 2, 3))
    jobs += tuple(hinted(i, 1, None, project="b") for i in (4, 5, 6, 7, 8))
    busy = tuple(ran(100 + g, "a", (g,), project="a") for g in range(4))
    assert _order(PROFILES["drf"], jobs, running=busy) == [4, 5, 6, 7, 1, 8, 2, 3]
    # A weight of 2 halves a project's share: a's 4 GPUs count as 2.
    weights = {"a": Project("a", weight=2.0)}
    assert _order(PROFILES["drf"], jobs, running=busy, projects=weights)[:4] == [4, 5, 1, 6]


def test_other_orders_report_their_place_as_the_score() -> None:
    jobs = (hinted(1, 1, 300.0), hinted(2, 1, 100.0))
    snapshot = Snapshot((node("a", 8),), pending=jobs, config=PROFILES["sjf-oracle"])
    ordered, factors = rank(snapshot, NOW)
    assert [factors[j.id].score for j in ordered] == [0.0, -1.0]


def test_running_jobs_rank_ahead_of_pending_ones_at_an_equal_value() -> None:
    config = PROFILES["las"]
    fresh, incumbent = pending(1, 1, t=0.0), ran(2, "a", (0,), start=NOW)
    assert sort_key(incumbent, NOW, config) < sort_key(fresh, NOW, config)


def test_unknown_names_raise_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="fifo-backfill.*srtf-oracle"):
        profile("tiresias")
    snapshot = Snapshot((node("a", 8),), config=replace(PolicyConfig(), order="lottery"))
    with pytest.raises(ValueError, match="priority, fifo, sjf, srtf, las, drf"):
        rank(snapshot, NOW)


def test_profiles_keep_what_the_base_sets() -> None:
    base = replace(PolicyConfig(), spread_wide_jobs=True, default_time_limit_s=600.0)
    for name in PROFILES:
        config = profile(name, base)
        assert config.spread_wide_jobs and config.default_time_limit_s == 600.0
    assert profile("default", base) == base
    assert PROFILES["default"] == PolicyConfig()


# Properties over random clusters -----------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> Snapshot:
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    nodes = tuple(node(f"n{i}", rnd.randint(1, 8)) for i in range(rnd.randint(1, 3)))
    run: list[RunningJob] = []
    next_id = 100
    for n in nodes:
        free = [g.index for g in n.gpus if rnd.random() < 0.4]
        while free:
            k = rnd.randint(1, len(free))
            take, free = free[:k], free[k:]
            job = ran(next_id, n.name, tuple(take), hint=rnd.choice([None, 50.0, 5000.0]),
                      start=rnd.choice([0.0, 500.0, NOW]), project=rnd.choice("ab"))  # fmt: skip
            run.append(replace(job, attained_s=rnd.choice([0.0, 2000.0]),
                               priority=rnd.choice([200, 300])))  # fmt: skip
            next_id += 1
    jobs = []
    for i in range(rnd.randint(1, 10)):
        job = hinted(i + 1, rnd.randint(0, 9), rnd.choice([None, 10.0, 300.0, 9000.0]),
                     t=float(rnd.randint(0, 5)), attained=rnd.choice([0.0, 0.0, 3000.0]),
                     project=rnd.choice("ab"), limit=rnd.choice([None, 60.0]))  # fmt: skip
        if rnd.random() < 0.1:
            job = replace(job, resources=Resources(gpus=1, gpu_fraction=0.5))
        jobs.append(replace(job, priority=rnd.choice([200, 300])))
    config = profile(draw(st.sampled_from(sorted(PROFILES))))
    rule = draw(st.sampled_from(list(WidePlacement)))
    config = replace(config, spread_wide_jobs=draw(st.booleans()), wide_placement=rule)
    projects = {"a": Project("a", quota=2.0)} if draw(st.booleans()) else {}
    return Snapshot(nodes, tuple(jobs), tuple(run), config=config, projects=projects)


def _check(snap: Snapshot, d: Decision) -> None:
    used = {(r.node, g) for r in snap.running for g in r.gpus}
    exists = {(n.name, g.index) for n in snap.nodes for g in n.gpus}
    jobs = {j.id: j for j in snap.pending}
    for s in d.starts:
        pieces = [(s.node, s.gpus), *s.more]
        got = [(n, g) for n, gs in pieces for g in gs]
        assert set(got) <= exists and len(set(got)) == len(got)
        if not jobs[s.job_id].resources.fractional:
            assert not set(got) & used, "a whole-GPU start on a GPU in use"
            used.update(got)
    victims = [p.job_id for p in d.preemptions]
    assert len(victims) == len(set(victims)), "a victim preempted twice"
    assert set(victims) <= {r.id for r in snap.running}
    assert {p.for_job_id for p in d.preemptions} <= set(jobs) - started(d)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_no_profile_over_allocates_and_a_replay_settles(snap: Snapshot) -> None:
    """Every decision is valid, and applying starts and preemptions at once and deciding again
    at the same time (as the replay does) comes to rest: no job is swapped back and forth."""
    for _ in range(30):
        d = decide(snap, NOW)
        _check(snap, d)
        if not d.starts and not d.preemptions:
            return
        jobs = {j.id: j for j in snap.pending}
        gone = {p.job_id for p in d.preemptions}
        keep = [r for r in snap.running if r.id not in gone]
        back = {r.id: r for r in snap.running if r.id in gone}
        requeued = [
            PendingJob(r.id, replace(r.resources, gpus=sum(len(x.gpus) for x in snap.running
                                                           if x.id == r.id)),
                       r.priority, 0.0, project=r.project, runtime_hint_s=r.runtime_hint_s,
                       attained_s=r.attained_s + NOW - r.start_time)
            for r in back.values()
        ]  # fmt: skip
        for s in d.starts:
            job = jobs.pop(s.job_id)
            for n, gs in [(s.node, s.gpus), *s.more]:
                res = replace(job.resources, gpus=len(gs)) if s.more else job.resources
                keep.append(RunningJob(job.id, n, gs, res, NOW, job.priority,
                                       project=job.project, runtime_hint_s=job.runtime_hint_s,
                                       attained_s=job.attained_s,
                                       gpu_memory_bytes=s.gpu_memory_bytes))  # fmt: skip
        snap = replace(snap, running=tuple(keep), pending=(*jobs.values(), *requeued))
    pytest.fail("no rest after 30 decisions at the same time")
