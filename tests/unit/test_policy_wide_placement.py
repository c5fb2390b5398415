"""The two rules for laying a wide job over nodes (`PolicyConfig.wide_placement`,
policy/wide.py): `spread` takes the nodes with the most free GPUs first, partly used or not,
the last one best fit; `consolidate` takes whole free nodes only, the remainder of a size
that is not a multiple of the node size on the one other node with the most free GPUs (the
Helios artifact's consolidate placer). Placement, reservation, why, and the preemptive
baselines' victims under each; the properties in test_policy_wide.py run under both."""

from __future__ import annotations

from dataclasses import replace

from policy_builders import node, res, running

from gpupool.core.hardware import Node
from gpupool.policy import Code, Decision, PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.node_free import NodeFree
from gpupool.policy.profiles import profile
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PolicyConfig, WidePlacement
from gpupool.policy.wide import place_wide

SPREAD = PolicyConfig(spread_wide_jobs=True, default_time_limit_s=1000.0)
CONSOLIDATE = replace(SPREAD, wide_placement=WidePlacement.CONSOLIDATE)


def cluster(*names: str) -> tuple[Node, ...]:
    return tuple(node(n, 8) for n in names)


def job(job_id: int, gpus: int, hint: float | None = None) -> PendingJob:
    return PendingJob(job_id, res(gpus), 100, 0.0, runtime_hint_s=hint)


def busy(job_id: int, node_name: str, gpus: list[int], ends: float) -> RunningJob:
    """Running since 0, ending at `ends` (its time limit and its true run time)."""
    return replace(running(job_id, node_name, gpus), time_limit_s=ends, runtime_hint_s=ends)


def run(
    nodes: tuple[Node, ...],
    jobs: tuple[PendingJob, ...],
    live: tuple[RunningJob, ...],
    config: PolicyConfig,
) -> Decision:
    return decide(Snapshot(nodes, jobs, live, config=config), 0.0)


def where(d: Decision, job_id: int) -> dict[str, int]:
    """Node -> how many GPUs the job starts with there."""
    (s,) = [s for s in d.starts if s.job_id == job_id]
    return {name: len(gpus) for name, gpus in [(s.node, s.gpus), *s.more]}


# a is whole and free; b and c have 7 free each (one GPU busy until 100 and 50).
PARTLY = cluster("a", "b", "c")
ONE_BUSY = (busy(8, "b", [0], 100.0), busy(9, "c", [0], 50.0))


def test_spread_takes_the_most_free_nodes_first_partly_used_or_not() -> None:
    # 16 GPUs: a whole (8), then b (7, the first of the two partly used ones by name), then
    # the 1 left on c: three nodes, now. Not "whole free nodes first, the rest best fit".
    d = run(PARTLY, (job(1, 16),), ONE_BUSY, SPREAD)
    assert where(d, 1) == {"a": 8, "b": 7, "c": 1}


def test_consolidate_waits_for_whole_free_nodes_and_reserves_the_first_time_there_are() -> None:
    d = run(PARTLY, (job(1, 16),), ONE_BUSY, CONSOLIDATE)
    assert d.starts == ()
    status = d.pending[1]
    assert status.code is Code.RESOURCES
    assert "22 free across the pool" in status_text(status)
    assert "whole free nodes only (wide placement: consolidate), 1 is free" in status_text(status)
    # c is whole again at 50 (b only at 100): a and c from then.
    (r,) = d.reservations
    assert (r.job_id, r.node, r.time) == (1, "a", 50.0)
    assert d.estimated_start[1] == 50.0


def test_consolidate_takes_whole_free_nodes_for_a_multiple_of_the_node_size() -> None:
    d = run(cluster("a", "b", "c"), (job(1, 16),), (busy(9, "b", [0], 100.0),), CONSOLIDATE)
    assert where(d, 1) == {"a": 8, "c": 8}


def test_the_remainder_goes_best_fit_by_spread_and_on_the_most_free_node_by_consolidate() -> None:
    # 12 GPUs with a and b whole, c with 4 free: spread fills c's fragment; consolidate, as
    # Helios' placer, puts the 4 on the node with the most free GPUs after a: b.
    nodes, live = cluster("a", "b", "c"), (busy(9, "c", [0, 1, 2, 3], 100.0),)
    assert where(run(nodes, (job(1, 12),), live, SPREAD), 1) == {"a": 8, "c": 4}
    assert where(run(nodes, (job(1, 12),), live, CONSOLIDATE), 1) == {"a": 8, "b": 4}
    # With one whole node only, the 4 go on the partly used node with the most free (c: 5).
    nodes = cluster("a", "b", "c")
    live = (busy(8, "b", [0, 1, 2, 3], 100.0), busy(9, "c", [0, 1, 2], 100.0))
    assert where(run(nodes, (job(1, 12),), live, CONSOLIDATE), 1) == {"a": 8, "c": 4}
    # ... and none covers them (3 and 3 free): it waits, where spread starts it.
    live = (busy(8, "b", [0, 1, 2, 3, 4], 100.0), busy(9, "c", [0, 1, 2, 3, 4], 100.0))
    assert run(nodes, (job(1, 12),), live, CONSOLIDATE).starts == ()
    assert where(run(nodes, (job(1, 12),), live, SPREAD), 1) == {"a": 8, "b": 3, "c": 1}


def test_place_wide_by_rule_on_free_views() -> None:
    nodes = cluster("a", "b")

    def frees(free_a: int, free_b: int) -> list[NodeFree]:
        return [
            NodeFree(nodes[0], set(range(8 - free_a, 8)), None, None),
            NodeFree(nodes[1], set(range(8 - free_b, 8)), None, None),
        ]

    assert place_wide(frees(8, 7), res(15)) is not None
    assert place_wide(frees(8, 7), res(16)) is None  # 15 free
    # One whole node and the rest on the other: 9, 14, 15; 16 needs two whole nodes.
    for gpus in (9, 14, 15):
        placed = place_wide(frees(8, 7), res(gpus), WidePlacement.CONSOLIDATE)
        assert placed is not None
        assert [(p.node, len(p.gpus)) for p in placed] == [("a", 8), ("b", gpus - 8)]
    assert place_wide(frees(8, 8), res(16), WidePlacement.CONSOLIDATE) is not None
    assert place_wide(frees(7, 8), res(15), WidePlacement.CONSOLIDATE) is not None
    assert place_wide(frees(7, 7), res(9), WidePlacement.CONSOLIDATE) is None
    assert place_wide(frees(7, 7), res(9)) is not None


def test_one_node_jobs_are_placed_alike_by_both_rules() -> None:
    jobs = (job(1, 3), job(2, 8), job(3, 5))
    assert run(PARTLY, jobs, ONE_BUSY, SPREAD) == run(PARTLY, jobs, ONE_BUSY, CONSOLIDATE)


def test_srtf_under_consolidate_stops_no_job_that_would_not_let_the_wide_one_start() -> None:
    # a: k1 (ranks ahead: 10 s left) and r5 (1000 s) on 7; b: r6 (900 s) on 8; c: k2 (20 s)
    # and 7 free. Job 1 (16 GPUs, 50 s) ranks behind k1 and k2 and ahead of r5 and r6. By
    # count, stopping r5 and r6 frees enough (22 GPUs) and spread would place it; but a and c
    # keep k1 and k2, so only b would be whole: by consolidate no victims make it fit, and
    # none are stopped for nothing.
    nodes = cluster("a", "b", "c")
    live = (
        busy(11, "a", [7], 10.0),
        busy(5, "a", list(range(7)), 1000.0),
        busy(6, "b", list(range(8)), 900.0),
        busy(12, "c", [0], 20.0),
    )
    srtf = profile("srtf-oracle", SPREAD)
    spread = run(nodes, (job(1, 16, hint=50.0),), live, srtf)
    assert {p.job_id for p in spread.preemptions} == {5, 6}
    consolidate = run(
        nodes,
        (job(1, 16, hint=50.0),),
        live,
        replace(srtf, wide_placement=WidePlacement.CONSOLIDATE),
    )
    assert consolidate.preemptions == ()
    assert consolidate.pending[1].code is Code.RESOURCES


def test_srtf_under_consolidate_stops_the_job_that_empties_a_whole_node() -> None:
    # a: r5 (1000 s) on 1 GPU; b: r6 (900 s) on all 8; c, d free. Job 1 (24 GPUs, 50 s)
    # and r6 fill the budget of 32; r5 is the one to stop, and a is then whole.
    nodes = cluster("a", "b", "c", "d")
    live = (busy(5, "a", [0], 1000.0), busy(6, "b", list(range(8)), 900.0))
    srtf = replace(profile("srtf-oracle", SPREAD), wide_placement=WidePlacement.CONSOLIDATE)
    d = run(nodes, (job(1, 24, hint=50.0),), live, srtf)
    assert [p.job_id for p in d.preemptions] == [5]
