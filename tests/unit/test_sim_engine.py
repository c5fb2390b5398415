"""The replay loop on tiny traces whose job completion times are worked out by hand (the
derivations are in the comments), plus its bookkeeping: preemption costs, the pass grid,
decayed usage, refused jobs, and isolated clusters merged."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from gpupool.policy.fairshare import UsageInterval, decayed_usage
from gpupool.policy.profiles import profile
from gpupool.sim.clusters import uniform_cluster
from gpupool.sim.engine import SimOptions, replay
from gpupool.sim.model import SimCluster, Trace, TraceJob
from gpupool.sim.run import SIM_BASE, SimPlan, replay_policy

EXACT = SimOptions(estimates="oracle", interval_s=0.0)


def _trace(*jobs: tuple[float, float, int]) -> Trace:
    """(submit, duration, gpus) per job; ids 1, 2, ... in the order given."""
    return Trace(tuple(TraceJob(i, s, d, g, project="p") for i, (s, d, g) in enumerate(jobs, 1)))


def _jcts(
    trace: Trace, cluster: SimCluster, policy: str, options: SimOptions = EXACT
) -> dict[int, float]:
    result = replay(trace, cluster, profile(policy, SIM_BASE), policy, options)
    jct = {r.id: r.jct_s for r in result.records}
    assert all(v is not None for v in jct.values()), f"{policy}: unfinished jobs"
    return {k: v for k, v in jct.items() if v is not None}


# One node of 4 GPUs.
#   J1 t=0  100s 2 GPUs | J2 t=10 50s 4 GPUs | J3 t=20 30s 2 GPUs | J4 t=30 200s 1 GPU
#   J5 t=40 40s 2 GPUs
BACKFILL_TRACE = _trace((0, 100, 2), (10, 50, 4), (20, 30, 2), (30, 200, 1), (40, 40, 2))


def test_fifo_blocks_everything_behind_the_first_job_that_cannot_start() -> None:
    # t=0 J1 starts (ends 100). t=10 J2 needs 4, 2 free: blocks J3, J4, J5 behind it.
    # t=100 J2 starts (ends 150). t=150 J3 (ends 180) and J4 (ends 350) start; J5 needs 2
    # of the 1 left and waits. t=180 J5 starts (ends 220).
    jct = _jcts(BACKFILL_TRACE, uniform_cluster(1, 4), "fifo")
    assert jct == {1: 100, 2: 140, 3: 160, 4: 320, 5: 180}


def test_fifo_backfill_starts_short_jobs_that_end_before_the_reservation() -> None:
    # t=10 J2 gets the reservation at t=100 (all 4 GPUs). t=20 J3 ends at 50 <= 100:
    # backfills. t=30 J4 would end at 230 > 100 and nothing is spare: waits. t=50 J3 ends;
    # J5 (ends 90 <= 100) backfills, J4 still may not. t=100 J2 (ends 150); t=150 J4 (350).
    jct = _jcts(BACKFILL_TRACE, uniform_cluster(1, 4), "fifo-backfill")
    assert jct == {1: 100, 2: 140, 3: 30, 4: 320, 5: 50}


def test_srtf_oracle_preempts_for_the_shortest_remaining_time() -> None:
    # One GPU, no restart overhead, checkpointing: classic SRTF.
    # t=0 J1 (100). t=10 J2 (20) < J1's 90 left: J1 preempted. t=15 J3 (50) > J2's 15 left.
    # t=20 J4 (5) < J2's 10 left: J2 preempted; J4 ends 25. J2 back, ends 35. J3 (50 < J1's
    # 90) runs 35-85. J1 resumes at 85 with 90 left; t=100 J5 (10) < J1's 75 left: J1
    # preempted again, J5 ends 110, J1 ends 110 + 75 = 185.
    trace = _trace((0, 100, 1), (10, 20, 1), (15, 50, 1), (20, 5, 1), (100, 10, 1))
    options = SimOptions(
        estimates="oracle", interval_s=0.0, restart_overhead_s=0.0, checkpointing=True
    )
    result = replay(trace, uniform_cluster(1, 1), profile("srtf-oracle", SIM_BASE), "srtf", options)
    assert {r.id: r.jct_s for r in result.records} == {1: 185, 2: 25, 3: 70, 4: 5, 5: 10}
    assert {r.id: r.preemptions for r in result.records} == {1: 2, 2: 1, 3: 0, 4: 0, 5: 0}


@pytest.mark.parametrize(
    ("checkpointing", "j1_jct", "j1_lost"),
    [
        # Progress lost: J1 ran 10 s for nothing, then needs 60 s overhead + all 100 s.
        (False, 30 + 60 + 100, 10 + 60),
        # Progress kept: 60 s overhead + the 90 s left; only the overhead is lost.
        (True, 30 + 60 + 90, 60),
    ],
)
def test_preemption_costs_restart_overhead_and_lost_progress(
    checkpointing: bool, j1_jct: float, j1_lost: float
) -> None:
    trace = _trace((0, 100, 1), (10, 20, 1))
    options = SimOptions(estimates="oracle", interval_s=0.0, checkpointing=checkpointing)
    result = replay(trace, uniform_cluster(1, 1), profile("srtf-oracle", SIM_BASE), "srtf", options)
    j1, j2 = sorted(result.records, key=lambda r: r.id)
    assert (j1.jct_s, j2.jct_s) == (j1_jct, 20)
    assert j1.preemptions == 1 and j1.lost_gpu_s == j1_lost
    assert j1.queue_s == 20  # waited from its preemption at 10 until J2 ended at 30
    assert j1.run_gpu_s == 10 + (j1_jct - 30)


def test_passes_run_on_the_interval_grid() -> None:
    # Interval 60: the job submitted at t=10 starts at the first grid point, t=60; the one
    # queued behind it (t=20, both GPUs busy) starts at the first grid point after t=160.
    trace = _trace((10, 100, 1), (20, 30, 1))
    options = SimOptions(estimates="oracle", interval_s=60.0)
    result = replay(trace, uniform_cluster(1, 1), profile("fifo", SIM_BASE), "fifo", options)
    starts = {r.id: r.first_start_s for r in sorted(result.records, key=lambda r: r.id)}
    assert starts == {1: 60.0, 2: 180.0}


def test_jobs_wider_than_the_cluster_are_refused_and_wide_jobs_span_nodes() -> None:
    # 2 nodes of 8: a 16-GPU job runs across both; a 24-GPU job can never run.
    trace = _trace((0, 50, 16), (1, 10, 24), (2, 10, 8))
    result = replay(trace, uniform_cluster(2, 8), profile("fifo", SIM_BASE), "fifo", EXACT)
    assert result.refused == 1
    jct = {r.id: r.jct_s for r in result.records}
    assert jct == {1: 50, 3: 58}  # job 3 waits for the wide job to free a node


def test_every_profile_finishes_every_job_without_overcommitting() -> None:
    rng = random.Random(7)
    jobs = []
    t = 0.0
    for i in range(1, 121):
        t += rng.expovariate(1 / 40)
        jobs.append(TraceJob(i, t, rng.choice([5, 60, 600, 3000]), rng.choice([1, 1, 2, 4, 8, 16]),
                             project=rng.choice(["a", "b", "c"])))  # fmt: skip
    trace = Trace(tuple(jobs))
    cluster = uniform_cluster(3, 8)
    for name in ("fifo", "fifo-backfill", "sjf-oracle", "srtf-oracle", "las", "drf", "default"):
        result = replay(trace, cluster, profile(name, SIM_BASE), name, SimOptions(interval_s=30.0))
        assert all(r.end_s is not None for r in result.records), name
        assert all(s.busy_gpus <= cluster.gpus for s in result.samples), name
        for r in result.records:
            assert r.first_start_s is not None and r.first_start_s >= r.submit_s
            assert r.end_s >= r.first_start_s + r.duration_s - 1e-9, name  # type: ignore[operator]


def test_usage_tracker_matches_the_daemon_formula() -> None:
    from gpupool.sim.usage import UsageTracker

    rng = random.Random(3)
    half_life = 7 * 86400.0
    tracker = UsageTracker(half_life)
    intervals = []
    for _ in range(50):
        start = rng.uniform(0, 30 * 86400)
        end = start + rng.uniform(60, 5 * 86400)
        project, gpus = rng.choice(["a", "b"]), float(rng.choice([1, 2, 8]))
        intervals.append(UsageInterval(project, "", gpus, start, end))
    now = 20 * 86400.0
    events = sorted(
        [(iv.start, 0, iv) for iv in intervals] + [(iv.end, 1, iv) for iv in intervals],
        key=lambda e: (e[0], e[1]),
    )
    for t, kind, iv in events:
        if t > now:
            break
        if kind == 0:
            tracker.start(iv.project, iv.user, iv.gpus, t)
        else:
            tracker.stop(iv.project, iv.user, iv.gpus, iv.start, t)
    got = tracker.usage(now).by_project
    want = decayed_usage([iv for iv in intervals if iv.start <= now], now, half_life).by_project
    assert got.keys() == want.keys()
    for key in want:
        assert math.isclose(got[key], want[key], rel_tol=1e-9), key


def test_isolated_clusters_replay_each_project_alone_and_merge() -> None:
    # Two VCs of one 1-GPU node each: their jobs never wait for each other.
    trace = Trace(
        (
            TraceJob(1, 0, 100, 1, project="a"),
            TraceJob(2, 0, 100, 1, project="b"),
            TraceJob(3, 10, 10, 1, project="a"),
        )
    )
    clusters = {"a": uniform_cluster(1, 1), "b": uniform_cluster(1, 1)}
    result = replay_policy(SimPlan(trace, clusters, ("fifo",), EXACT), "fifo")
    assert {r.id: r.jct_s for r in result.records} == {1: 100, 2: 100, 3: 100}
    assert result.capacity_gpus == 2
    assert max(s.busy_gpus for s in result.samples) == 2


@pytest.mark.parametrize("policy", ["fifo-backfill", "default"])
def test_leaving_out_idle_passes_changes_nothing(policy: str) -> None:
    # A busy 2-node cluster with quotas: many passes can start nothing.
    from gpupool.core.project import Project

    rng = random.Random(11)
    jobs, t = [], 0.0
    for i in range(1, 151):
        t += rng.expovariate(1 / 20)
        jobs.append(TraceJob(i, t, rng.choice([30, 300, 2000]), rng.choice([1, 2, 4, 8, 12]),
                             project=rng.choice(["a", "b"])))  # fmt: skip
    base = uniform_cluster(2, 8)
    cluster = SimCluster("q", base.nodes, {"a": Project("a", quota=8), "b": Project("b", quota=8)})
    outcomes = []
    for skip in (True, False):
        options = SimOptions(interval_s=30.0, skip_idle_passes=skip)
        result = replay(Trace(tuple(jobs)), cluster, profile(policy, SIM_BASE), policy, options)
        outcomes.append([(r.id, r.first_start_s, r.end_s, r.preemptions) for r in result.records])
        calls = result.decide_calls
        if skip:
            skipped_calls = calls
    assert outcomes[0] == outcomes[1]
    assert skipped_calls < calls  # and it did leave some out


def test_isolated_plan_refuses_a_trace_with_jobs_no_cluster_replays() -> None:
    # A job of a project without a cluster would be dropped silently: the plan says so, and
    # `replayable` takes such jobs out, counting them.
    from gpupool.sim.run import NO_CLUSTER, replayable

    trace = Trace((TraceJob(1, 0, 100, 1, project="a"), TraceJob(2, 0, 100, 1, project="z")))
    clusters = {"a": uniform_cluster(1, 1)}
    with pytest.raises(ValueError, match="1 job of projects without a cluster: z"):
        SimPlan(trace, clusters, ("fifo",), EXACT)
    kept = replayable(trace, clusters)
    assert [j.id for j in kept.jobs] == [1] and kept.skipped == {NO_CLUSTER: 1}
    result = replay_policy(SimPlan(kept, clusters, ("fifo",), EXACT), "fifo")
    assert [r.id for r in result.records] == [1]
    assert replayable(trace, {"": uniform_cluster(1, 1)}) is trace  # a shared cluster runs all


def test_a_drain_keeps_its_gpus_empty_for_its_window_and_jobs_there_run_on() -> None:
    """One node of 2 GPUs, GPU 0 drained from t=50 to t=300 (after the trace's first
    submission, t=0). J1 (t=0, 100 s) starts on GPU 0 before the drain and runs on through
    it; J2 (t=60, 100 s) takes GPU 1; J3 (t=70, 10 s) finds GPU 0 free at t=100 but drained:
    it waits for J2's end at t=160; J4 (t=80, 2 GPUs) waits for the drain's end at t=300."""
    from gpupool.sim.drain_windows import SimDrain

    trace = _trace((0, 100, 1), (60, 100, 1), (70, 10, 1), (80, 20, 2))
    drain = SimDrain("node-001", 0, 50.0, 300.0)
    options = replace(EXACT, drains=(drain,))
    jct = _jcts(trace, uniform_cluster(1, 2), "fifo-backfill", options)
    assert jct == {1: 100, 2: 100, 3: 100, 4: 240}
    plain = _jcts(trace, uniform_cluster(1, 2), "fifo-backfill")
    assert plain[3] < 100 and plain[4] < 240  # without it J3 and J4 start sooner
    with pytest.raises(ValueError, match="no node 'nowhere'"):
        replay(trace, uniform_cluster(1, 2), profile("fifo", SIM_BASE), "fifo",
               replace(EXACT, drains=(SimDrain("nowhere", None, 0.0, 1.0),)))  # fmt: skip


def test_a_per_user_cap_replays_as_the_daemon_holds_it() -> None:
    """One node of 4 GPUs, a cap of 2 GPUs per user: ann's third 1-GPU job waits for her
    first to end while bo's starts (PolicyConfig.max_gpus_per_user, policy/user_caps.py)."""
    jobs = [(0.0, 100.0, "ann"), (0.0, 100.0, "ann"), (1.0, 100.0, "ann"), (2.0, 100.0, "bo")]
    trace = Trace(tuple(TraceJob(i, s, d, 1, project="p", user=u) for i, (s, d, u) in
                        enumerate(jobs, 1)))  # fmt: skip
    config = replace(profile("default", SIM_BASE), max_gpus_per_user=2)
    result = replay(trace, uniform_cluster(1, 4), config, "default", EXACT)
    jct = {r.id: r.jct_s for r in result.records}
    assert jct == {1: 100, 2: 100, 3: 199, 4: 100}
