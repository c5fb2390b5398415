"""Wide jobs (policy/wide.py): whole-GPU jobs larger than any node, spread over several nodes
when `PolicyConfig.spread_wide_jobs` is on (the trace-replay simulator), refused when off.

Cases first (placement, reservation, backfill around it, running spread jobs, feasibility,
reclaim), then properties: no over-allocation, nothing changes for one-node jobs, and the
reserved job is never delayed by the jobs that backfill around it when limits are exact.
"""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_builders import H100, node, pending, res, running

from gpupool.core.hardware import Node
from gpupool.core.project import Project
from gpupool.policy import Code, Decision, PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.node_free import NodeFree
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PolicyConfig, WidePlacement
from gpupool.policy.wide import place_wide

SPREAD = PolicyConfig(spread_wide_jobs=True, default_time_limit_s=1000.0)


def job(job_id: int, gpus: int, limit: float | None = None, **kw: object) -> PendingJob:
    return replace(pending(job_id, gpus, **kw), time_limit_s=limit)  # type: ignore[arg-type]


def busy(job_id: int, node_name: str, gpus: list[int], ends: float, **kw: object) -> RunningJob:
    """Running since 0, ending at `ends` (its time limit)."""
    return replace(running(job_id, node_name, gpus, **kw), time_limit_s=ends)  # type: ignore[arg-type]


def spread_running(job_id: int, parts: dict[str, list[int]], ends: float) -> tuple[RunningJob, ...]:
    """A running spread job as the snapshot gives it: one entry per node, same id."""
    return tuple(busy(job_id, name, gpus, ends) for name, gpus in parts.items())


def nodes(*names: str, count: int = 8, **kw: object) -> tuple[Node, ...]:
    return tuple(node(n, count, **kw) for n in names)  # type: ignore[arg-type]


def run(
    cluster: tuple[Node, ...],
    jobs: tuple[PendingJob, ...],
    busy_jobs: tuple[RunningJob, ...] = (),
    config: PolicyConfig = SPREAD,
    now: float = 0.0,
) -> Decision:
    return decide(Snapshot(cluster, jobs, busy_jobs, config=config), now)


def where(d: Decision, job_id: int) -> dict[str, tuple[int, ...]]:
    """Node -> GPUs of the job's start."""
    (s,) = [s for s in d.starts if s.job_id == job_id]
    return {s.node: s.gpus, **dict(s.more)}


# --- placement ------------------------------------------------------------------------------


def test_spread_off_a_job_larger_than_any_node_is_unsatisfiable() -> None:
    d = run(nodes("a", "b"), (job(1, 16),), config=PolicyConfig())
    assert d.starts == ()
    assert d.pending[1].code is Code.UNSATISFIABLE
    assert "needs 16 GPUs on one node" in status_text(d.pending[1])


def test_spread_on_it_takes_exactly_two_whole_free_nodes() -> None:
    # c has 8 GPUs, one busy: a and b are whole and free, and come first.
    d = run(nodes("a", "b", "c", count=8), (job(1, 16),), (busy(9, "c", [0], 100.0),))
    (start,) = d.starts
    assert (start.node, start.gpus) == ("a", tuple(range(8)))
    assert start.more == (("b", tuple(range(8))),)
    assert d.pending == {}


def test_the_last_node_is_the_best_fit() -> None:
    # 12 GPUs: 8 whole on a, then the 4 on c (4 free) rather than breaking b.
    d = run(nodes("a", "b", "c"), (job(1, 12),), (busy(9, "c", [0, 1, 2, 3], 100.0),))
    assert where(d, 1) == {"a": tuple(range(8)), "c": (4, 5, 6, 7)}


def test_twelve_on_eight_plus_eight_takes_eight_and_four() -> None:
    d = run(nodes("a", "b"), (job(1, 12),))
    assert sorted(len(g) for g in where(d, 1).values()) == [4, 8]


def test_gpu_type_keeps_a_wide_job_on_matching_nodes() -> None:
    cluster = (*nodes("a", "b"), node("h", 8, H100))
    d = run(cluster, (job(1, 16, gpu_type="H100"), job(2, 12, gpu_type="A100")))
    assert d.pending[1].code is Code.UNSATISFIABLE
    assert "the whole pool has 8" in status_text(d.pending[1])
    assert set(where(d, 2)) == {"a", "b"}


def test_cpus_and_memory_are_per_node() -> None:
    # Each node the job uses must have its 16 CPUs: b has only 8 free.
    cluster = nodes("a", "b", "c", cpus=32)
    d = run(cluster, (job(1, 16, cpus=16),), (busy(9, "b", [0], 100.0, cpus=24),))
    assert set(where(d, 1)) == {"a", "c"}
    free = [NodeFree(n, set(range(8)), 32, None) for n in cluster]
    placed = place_wide(free, res(24, cpus=40))
    assert placed is None


# --- reservation and backfill ---------------------------------------------------------------

# n0 frees at 100, n1 at 200, n2 is free now: 16 GPUs at 100, 24 at 200.
THREE = nodes("n0", "n1", "n2")
HELD = (busy(90, "n0", list(range(8)), 100.0), busy(91, "n1", list(range(8)), 200.0))


def test_a_wide_job_reserves_when_the_pool_total_is_enough() -> None:
    for gpus, at in ((16, 100.0), (24, 200.0)):
        d = run(THREE, (job(1, gpus),), HELD)
        assert d.starts == ()
        status = d.pending[1]
        assert status.code is Code.RESOURCES
        fewest = gpus // 8
        assert f"needs {gpus} GPUs on at least {fewest} nodes; 8 free across the pool" in (
            status_text(status)
        )
        assert f"reserved {gpus} GPUs on {fewest} nodes from now+" in status_text(status)
        (r,) = d.reservations
        assert (r.job_id, r.node, r.gpus, r.time) == (1, "n0", tuple(range(8)), at)
        assert d.estimated_start[1] == at


def test_a_short_job_backfills_a_long_one_waits() -> None:
    # Job 1 is of a higher class: the head whatever its expected service (ordering.py puts
    # less GPU x limit first inside a class, which would put it last).
    jobs = (
        job(1, 16, prio=300),
        job(2, 2, limit=50.0),
        job(3, 2, limit=500.0),
        job(4, 9, limit=50.0),
    )
    d = run(THREE, jobs, HELD)
    assert [s.job_id for s in d.starts] == [2]
    assert d.pending[3].code is Code.PRIORITY
    # Job 3 outlasts the reservation, which holds all of n0 and n2; n1 is busy (issue 33: a
    # wide reservation is pinned to its nodes, so this is what keeps job 3 waiting).
    assert "fits now only on what is reserved" in status_text(d.pending[3])
    assert (
        "reserved 16 GPUs on 2 nodes from now+1m40s: GPUs 0,1,2,3,4,5,6,7 on n0, "
        "GPUs 0,1,2,3,4,5,6,7 on n2"
    ) in status_text(d.pending[3])
    assert d.pending[4].code is Code.RESOURCES  # 9 GPUs: wide too, and 6 are free


def test_a_wide_job_backfills_on_what_a_one_node_reservation_leaves_spare() -> None:
    # Job 1 (10 H100s) reserves GPUs 0-9 of n0 at 100; the long wide job 2 (18 GPUs) may take
    # n1, n2 and the two GPUs of n0 that are free and not reserved.
    cluster = (node("n0", 12, H100), *nodes("n1", "n2"))
    held = (busy(90, "n0", [0, 1, 2], 100.0),)
    d = run(cluster, (job(1, 10, gpu_type="H100", prio=300), job(2, 18, limit=500.0)), held)
    (r,) = d.reservations
    assert (r.job_id, r.node, r.gpus, r.time) == (1, "n0", tuple(range(10)), 100.0)
    assert where(d, 2) == {"n1": tuple(range(8)), "n2": tuple(range(8)), "n0": (10, 11)}
    # 19 would need a reserved GPU: it waits behind job 1.
    d = run(cluster, (job(1, 10, gpu_type="H100", prio=300), job(2, 19, limit=500.0)), held)
    assert d.starts == () and d.pending[2].code is Code.PRIORITY


def test_a_running_spread_job_holds_exactly_its_gpus() -> None:
    spread = spread_running(7, {"n0": list(range(8)), "n1": [0, 1, 2, 3]}, 100.0)
    d = run(THREE, (job(1, 12),), spread)
    assert where(d, 1) == {"n2": tuple(range(8)), "n1": (4, 5, 6, 7)}
    d = run(THREE, (job(1, 24),), spread)
    assert d.reservations[0].time == 100.0  # both of its entries are released then
    assert "12 free across the pool" in status_text(d.pending[1])


def test_unsatisfiable_names_the_pool_total() -> None:
    status = check_satisfiable(res(24), nodes("a", "b"), spread=True)
    assert status is not None and status.code is Code.UNSATISFIABLE
    assert status_text(status) == "needs 24 GPUs; the whole pool has 16"
    assert check_satisfiable(res(16), nodes("a", "b"), spread=True) is None
    assert check_satisfiable(res(16), nodes("a", "b")) is not None  # the default: off
    cpus = (node("a", 8, cpus=8), node("b", 8, cpus=32))
    status = check_satisfiable(res(16, cpus=16), cpus, spread=True)
    assert status is not None
    assert status_text(status) == "needs 16 GPUs over nodes with 16 CPUs each; those nodes have 8"


def test_reclaim_lists_a_spread_victim_once() -> None:
    """A borrowing spread job is one victim, though it has an entry on each node; a wide
    claim never reclaims (a reclaim plan fits one node) and reserves instead."""
    spread = tuple(
        replace(r, project="b")
        for r in spread_running(7, {"a": [*range(8)], "b": [*range(8)]}, 1e4)
    )
    quotas = {"a": Project("a", quota=16.0), "b": Project("b", quota=0.0)}
    claims = tuple(replace(job(i, 8), project="a") for i in (1, 2))
    snap = Snapshot(nodes("a", "b"), claims, spread, config=SPREAD, projects=quotas)
    d = decide(snap, 0.0)
    assert [p.job_id for p in d.preemptions] == [7]
    assert d.pending[1].code is Code.RECLAIM
    wide = (replace(job(3, 16), project="a"),)
    d = decide(replace(snap, pending=wide), 0.0)
    assert d.preemptions == ()
    assert d.pending[3].code is Code.RESOURCES and d.reservations[0].job_id == 3


# --- properties -----------------------------------------------------------------------------


@st.composite
def pools(draw: st.DrawFn, max_gpus: int = 32) -> Snapshot:
    """1-6 nodes of 8 GPUs (some with 16 CPUs), partly held by running jobs (some spread),
    and pending jobs of 1..max_gpus GPUs with time limits; spreading on, by either wide
    placement rule (test_policy_wide_placement.py)."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    cluster = tuple(node(f"n{i}", 8, cpus=rnd.choice([0, 16])) for i in range(rnd.randint(1, 6)))
    live: list[RunningJob] = []
    for n in cluster:
        free = list(range(8))
        rnd.shuffle(free)
        while free and rnd.random() < 0.6:
            k = rnd.randint(1, len(free))
            held, free = sorted(free[:k]), free[k:]
            live.append(busy(100 + len(live), n.name, held, float(rnd.randint(1, 300))))
    jobs = tuple(
        job(
            i + 1,
            rnd.randint(1, max_gpus),
            limit=rnd.choice([None, 10.0, 50.0, 150.0, 400.0]),
            cpus=rnd.choice([None, None, 4]),
        )
        for i in range(draw(st.integers(1, 10)))
    )
    rule = draw(st.sampled_from(list(WidePlacement)))
    config = replace(SPREAD, default_time_limit_s=100.0, wide_placement=rule)
    return Snapshot(cluster, jobs, tuple(live), config=config)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools())
def test_starts_never_over_allocate(snap: Snapshot) -> None:
    d = decide(snap, 0.0)
    held = {(r.node, g) for r in snap.running for g in r.gpus}
    cpus = {n.name: sum(r.resources.cpus or 0 for r in snap.running if r.node == n.name)
            for n in snap.nodes}  # fmt: skip
    jobs = {j.id: j for j in snap.pending}
    for s in d.starts:
        parts = [(s.node, s.gpus), *s.more]
        names = [name for name, _ in parts]
        assert len(set(names)) == len(names), s
        assert sum(len(g) for _, g in parts) == jobs[s.job_id].resources.gpus, s
        for name, gpus in parts:
            assert gpus, s
            for g in gpus:
                assert (name, g) not in held, s
                held.add((name, g))
            cpus[name] += jobs[s.job_id].resources.cpus or 0
    for n in snap.nodes:
        assert not n.cpus or cpus[n.name] <= n.cpus


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools(max_gpus=8))
def test_spreading_changes_nothing_for_one_node_jobs(snap: Snapshot) -> None:
    off = replace(snap, config=replace(snap.config, spread_wide_jobs=False))
    assert decide(snap, 0.0) == decide(off, 0.0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools())
def test_the_reserved_job_is_never_delayed_when_limits_are_exact(snap: Snapshot) -> None:
    """Run decide() at 0, then at every job end, starting what it says (a spread start
    becomes one running entry per node): the job reserved for T at 0 starts by T."""
    now, decision = 0.0, decide(snap, 0.0)
    if not decision.reservations:
        return
    reserved = decision.reservations[0]
    waiting = {j.id: j for j in snap.pending}
    live = list(snap.running)
    limit = snap.config.default_time_limit_s
    while True:
        for s in decision.starts:
            if s.job_id == reserved.job_id:
                assert now <= reserved.time
                return
            j = waiting.pop(s.job_id)
            for name, gpus in [(s.node, s.gpus), *s.more]:
                part = replace(j.resources, gpus=len(gpus))
                live.append(RunningJob(j.id, name, gpus, part, now, time_limit_s=j.time_limit_s))
        ends = [r.start_time + (limit if r.time_limit_s is None else r.time_limit_s) for r in live]
        assert ends, f"job {reserved.job_id} never started: {dict(decision.pending)}"
        now = min(ends)
        assert now <= reserved.time, (reserved, decision.pending[reserved.job_id])
        live = [r for r, e in zip(live, ends) if e > now]
        snap = replace(snap, pending=tuple(waiting.values()), running=tuple(live))
        decision = decide(snap, now)


def test_reclaim_counts_all_of_a_spread_victims_gpus_against_its_quota() -> None:
    """Stopping a spread job frees all its GPUs: a project holding 16 with quota 8 loses
    its 16-GPU job only as a job borrowing in part, preempted whole once no victim leaves it
    at its quota (issue 30), though each of the job's entries holds only 8; and the claim,
    within its quota, gets the GPUs it needs in one grace period."""
    spread = tuple(
        replace(r, project="b")
        for r in spread_running(7, {"a": [*range(8)], "b": [*range(8)]}, 1e4)
    )
    quotas = {"a": Project("a", quota=8.0), "b": Project("b", quota=8.0)}
    claim = (replace(job(1, 8), project="a"),)
    d = decide(Snapshot(nodes("a", "b"), claim, spread, config=SPREAD, projects=quotas), 0.0)
    (preempted,) = d.preemptions
    assert (preempted.job_id, preempted.for_job_id) == (7, 1)
    assert preempted.cause.victim_in_use == 16.0  # both entries: the whole job
    assert d.pending[1].code is Code.RECLAIM
