"""GPUs idle while a job that could use them waited (policy/idle_waiting.py): the rule, on real
passes (`decide`), and its invariants (hypothesis)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from policy_builders import node, pending, running

from gpupool.core.project import Project
from gpupool.policy import Decision, Snapshot, decide
from gpupool.policy.idle_waiting import (
    Hold,
    IdleCause,
    add_rate,
    idle_cause,
    idle_rate,
    rate_after_pass,
)
from gpupool.policy.profiles import profile
from gpupool.policy.status import Code, Rule, Status
from gpupool.sim.clusters import uniform_cluster
from gpupool.sim.engine import SimOptions, replay
from gpupool.sim.model import Trace, TraceJob
from gpupool.sim.run import SIM_BASE


def test_fragmentation_free_gpus_on_two_nodes_that_no_node_has_for_the_job() -> None:
    # The case: two 8-GPU nodes, 4 GPUs free on each, an 8-GPU job waits.
    snap = Snapshot(
        nodes=(node("a"), node("b")),
        running=(running(1, "a", range(4)), running(2, "b", range(4))),
        pending=(pending(3, 8),),
    )
    decision = decide(snap, now=10.0)
    assert not decision.starts
    assert rate_after_pass(snap, decision) == {IdleCause.FRAGMENTATION: 8.0}


def test_reservation_a_job_that_fits_waits_behind_the_reserved_one() -> None:
    # 4 GPUs, 2 held; the head asks 4 (too many for what is free: not counted), and a 2-GPU
    # job behind it waits on the 2 free GPUs for the head's reservation. The statuses are
    # the pass's data, given here as a pass gives them (backfill decides who waits).
    snap = Snapshot(
        nodes=(node("a", 4),),
        running=(running(1, "a", (0, 1)),),
        pending=(pending(2, 4), pending(3, 2)),
    )
    decision = Decision(
        pending={
            2: Status(Code.RESOURCES, Rule.NO_FIT),
            3: Status(Code.PRIORITY, Rule.BEHIND_RESERVATION),
        }
    )
    assert rate_after_pass(snap, decision) == {IdleCause.RESERVATION: 2.0}


def test_quota_a_project_at_its_limit_waits_on_free_gpus() -> None:
    snap = Snapshot(
        nodes=(node("a", 4),),
        running=(replace(running(1, "a", (0,)), project="p"),),
        pending=(replace(pending(2, 1), project="p"),),
        projects={"p": Project("p", quota=1, limit=1)},
    )
    decision = decide(snap, now=10.0)
    assert rate_after_pass(snap, decision) == {IdleCause.QUOTA: 1.0}


def test_nothing_idles_for_a_job_that_asks_more_than_is_free() -> None:
    snap = Snapshot(
        nodes=(node("a", 4),), running=(running(1, "a", (0, 1, 2)),), pending=(pending(2, 2),)
    )
    assert rate_after_pass(snap, decide(snap, now=1.0)) == {}


def test_jobs_that_do_not_wait_to_run_are_not_counted() -> None:
    later = replace(pending(1, 1), begin_time=1000.0)  # held by --begin
    snap = Snapshot(nodes=(node("a", 4),), pending=(later,))
    assert rate_after_pass(snap, decide(snap, now=1.0)) == {}


def test_the_idle_gpus_are_split_by_what_each_cause_asks() -> None:
    rate = idle_rate([(IdleCause.QUOTA, 3.0), (IdleCause.OTHER, 1.0)], free_gpus=2.0)
    assert rate == {IdleCause.QUOTA: 1.5, IdleCause.OTHER: 0.5}
    totals: dict[IdleCause, float] = {}
    add_rate(totals, rate, 10.0)
    assert totals == {IdleCause.QUOTA: 15.0, IdleCause.OTHER: 5.0}


def test_quota_comes_before_fragmentation_and_fragmentation_before_reservation() -> None:
    assert idle_cause(Hold.QUOTA, 8, True, 8, 4) is IdleCause.QUOTA
    assert idle_cause(Hold.QUEUE, 8, True, 8, 4) is IdleCause.FRAGMENTATION
    assert idle_cause(Hold.QUEUE, 4, True, 8, 4) is IdleCause.RESERVATION
    assert idle_cause(Hold.OTHER, 0.5, False, 0.5, 0) is IdleCause.OTHER  # a fraction


_asks = st.lists(st.tuples(st.sampled_from(list(IdleCause)), st.floats(0.0, 64.0)), max_size=20)


@given(_asks, st.floats(0.0, 128.0))
def test_idle_is_at_most_what_is_free_and_what_waiting_jobs_ask(
    asks: list[tuple[IdleCause, float]], free: float
) -> None:
    rate = idle_rate(asks, free)
    total = sum(rate.values())
    asked = sum(g for _, g in asks)
    assert total <= free + 1e-9
    assert total <= asked + 1e-9
    assert abs(total - min(free, asked)) <= 1e-6 * max(1.0, asked)
    for cause, gpus in rate.items():
        assert 0 <= gpus <= sum(g for c, g in asks if c is cause) + 1e-9


def test_the_replay_counts_fragmentation_over_time() -> None:
    # Two 8-GPU nodes, a 5-GPU job on each for 100 s: 3 GPUs free on each; a 6-GPU job
    # submitted at t=1 fits in the 6 free GPUs by count, on no node.
    jobs = (
        TraceJob(1, 0.0, 100.0, 5),
        TraceJob(2, 0.0, 100.0, 5),
        TraceJob(3, 1.0, 50.0, 6),
    )
    options = SimOptions(estimates="oracle", interval_s=0.0)
    result = replay(Trace(jobs), uniform_cluster(2, 8), profile("fifo", SIM_BASE), "f", options)
    # From t=1 to t=100: 6 GPUs free, the 6-GPU job could take them by count, no node has 6.
    assert result.idle_waiting_gpu_s["fragmentation"] == 6.0 * 99.0
    assert sum(result.idle_waiting_gpu_s.values()) == 6.0 * 99.0
