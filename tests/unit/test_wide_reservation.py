"""A wide job's reservation is pinned to its nodes (issue 33, item 4; policy/wide.py): it
names every node and the GPUs it holds on each, and a later job that outlasts it starts now
where it keeps off them. The issue's case under both wide placements, the reservation as data
and in words, and the same case replayed by the simulator."""

from __future__ import annotations

from dataclasses import replace

import pytest
from policy_builders import node, pending, running

from gpupool.core.hardware import Node
from gpupool.policy import Code, Decision, PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.reasons import Reservation
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PolicyConfig, PriorityWeights, WidePlacement
from gpupool.sim.clusters import uniform_cluster
from gpupool.sim.engine import SimOptions, replay
from gpupool.sim.model import Trace, TraceJob
from gpupool.sim.run import SIM_BASE

RULES = list(WidePlacement)
WHOLE = tuple(range(8))


def config(rule: WidePlacement) -> PolicyConfig:
    return PolicyConfig(spread_wide_jobs=True, default_time_limit_s=1000.0, wide_placement=rule)


def job(job_id: int, gpus: int, limit: float, **kw: object) -> PendingJob:
    return replace(pending(job_id, gpus, **kw), time_limit_s=limit)  # type: ignore[arg-type]


def busy(job_id: int, node_name: str, gpus: list[int], ends: float) -> RunningJob:
    """Running since 0, ending at `ends` (its time limit)."""
    return replace(running(job_id, node_name, gpus), time_limit_s=ends)


def abc() -> tuple[Node, ...]:
    return (node("A", 8), node("B", 8), node("C", 8))


def run(
    rule: WidePlacement,
    jobs: tuple[PendingJob, ...],
    held: tuple[RunningJob, ...],
    weights: PriorityWeights = PriorityWeights(),
) -> Decision:
    return decide(Snapshot(abc(), jobs, held, config=replace(config(rule), weights=weights)), 0.0)


# A frees at 100, B at 200; C has 4 GPUs held for good. The 16-GPU job fits at 200, on the
# two whole nodes A and B by either rule; C has 4 GPUs free that it never uses.
HELD = (busy(90, "A", list(WHOLE), 100.0), busy(91, "B", list(WHOLE), 200.0),
        busy(92, "C", [0, 1, 2, 3], 1e6))  # fmt: skip


@pytest.mark.parametrize("rule", RULES)
def test_the_issue_case_the_one_gpu_job_on_c_starts_at_once(rule: WidePlacement) -> None:
    """Job 1 needs two whole nodes and is reserved on A and B; job 2 (1 GPU, 7,080 s: it
    outlasts the reservation) fits on C and starts now; before issue 33 it waited."""
    d = run(rule, (job(1, 16, 1000.0, prio=300), job(2, 1, 7080.0)), HELD)
    (r,) = d.reservations
    assert r.job_id == 1 and r.time == 200.0
    assert set(r.parts()) == {("A", WHOLE), ("B", WHOLE)}
    assert [(s.job_id, s.node) for s in d.starts] == [(2, "C")]
    assert d.pending[1].code is Code.RESOURCES


@pytest.mark.parametrize("rule", RULES)
def test_a_job_that_outlasts_it_keeps_off_the_reserved_gpus(rule: WidePlacement) -> None:
    """A has 2 GPUs free now, all reserved: a long 1-GPU job, whose best fit now is A, goes to
    C instead; a long 3-GPU job fits on C too, and then a long 2-GPU job, which fits now
    only on A's reserved GPUs, waits behind the reservation, while a short one takes them."""
    held = (busy(90, "A", list(range(6)), 100.0), *HELD[1:])
    jobs = (job(1, 16, 1000.0, prio=300), job(2, 1, 7080.0), job(3, 3, 7080.0),
            job(4, 2, 7080.0), job(5, 2, 150.0))  # fmt: skip
    # The jobs are taken in submit order: without the service factor (ordering.py), which
    # would take the short job 5 first, and job 4 before job 3 (less GPU x limit).
    d = run(rule, jobs, held, PriorityWeights(service=0.0))
    (r,) = d.reservations
    assert set(r.parts()) == {("A", WHOLE), ("B", WHOLE)} and r.time == 200.0
    starts = {s.job_id: (s.node, s.gpus) for s in d.starts}
    assert {i: (name, len(gpus)) for i, (name, gpus) in starts.items()} == {
        2: ("C", 1),
        3: ("C", 3),
        5: ("A", 2),  # ends at 150, before the reservation: anything free will do
    }
    assert set(starts[2][1] + starts[3][1]) == {4, 5, 6, 7}
    assert d.pending[4].code is Code.PRIORITY
    words = status_text(d.pending[4])
    assert "this job fits now only on what is reserved" in words
    assert "GPUs 0,1,2,3,4,5,6,7 on A" in words and "GPUs 0,1,2,3,4,5,6,7 on B" in words


def test_a_spread_reservation_holds_only_the_gpus_it_will_use() -> None:
    """By spread the 12-GPU job is reserved at 100 on A (8) and 4 GPUs of C, the best fit
    for the rest: a long job may take the 4 other GPUs of C, never the reserved ones."""
    held = (busy(90, "A", list(WHOLE), 100.0), busy(91, "B", list(WHOLE), 200.0),
            busy(92, "C", [0, 1, 2, 3], 50.0))  # fmt: skip
    # Jobs 2 and 3 expect the same GPU-time (4 x 7,080 s = 1 x 28,320 s), so the service
    # factor (ordering.py) does not take job 3 first: the bigger job 2 is (the size factor).
    jobs = (job(1, 12, 1000.0, prio=300), job(2, 4, 7080.0), job(3, 1, 4 * 7080.0))
    d = run(WidePlacement.SPREAD, jobs, held)
    (r,) = d.reservations
    assert r == Reservation(1, "A", WHOLE, 100.0, more=(("C", (0, 1, 2, 3)),))
    assert {s.job_id: (s.node, s.gpus) for s in d.starts} == {2: ("C", (4, 5, 6, 7))}
    assert d.pending[3].code is Code.RESOURCES  # no GPU is left that it may take


def test_the_reservation_says_every_node_and_its_gpus() -> None:
    d = run(WidePlacement.SPREAD, (job(1, 16, 1000.0),), HELD)
    words = status_text(d.pending[1])
    assert words.endswith(
        "reserved 16 GPUs on 2 nodes from now+3m20s: GPUs 0,1,2,3,4,5,6,7 on A, "
        "GPUs 0,1,2,3,4,5,6,7 on B"
    ), words
    assert d.pending[1].reserved is not None
    assert d.pending[1].reserved.reservation == d.reservations[0]


@pytest.mark.parametrize("rule", RULES)
def test_the_simulator_starts_the_one_gpu_job_at_once(rule: WidePlacement) -> None:
    """The issue's case replayed (3 nodes of 8, exact estimates, a pass at every event): jobs
    1 and 2 hold the first two nodes until 100 and 200, job 3 half the third for good; the
    16-GPU job 4 (t=1) waits for 200 and starts then, on the first two nodes; the 1-GPU job 5
    (t=2, 7,080 s) starts at once on the third."""
    trace = Trace((TraceJob(1, 0.0, 100.0, 8, project="p"), TraceJob(2, 0.0, 200.0, 8, project="p"),
                   TraceJob(3, 0.0, 1e5, 4, project="p"), TraceJob(4, 1.0, 1000.0, 16, project="p"),
                   TraceJob(5, 2.0, 7080.0, 1, project="p")))  # fmt: skip
    base = replace(SIM_BASE, wide_placement=rule)
    options = SimOptions(estimates="oracle", interval_s=0.0)
    from gpupool.policy.profiles import profile

    result = replay(trace, uniform_cluster(3, 8), profile("fifo-backfill", base), "fb", options)
    starts = {r.id: r.first_start_s for r in result.records}
    assert starts[4] == 200.0
    assert starts[5] == 2.0
