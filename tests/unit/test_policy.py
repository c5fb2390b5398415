"""Table-driven tests of the pure policy, Kueue-style: cluster + running + pending -> decision.

Each case is a small cluster (built with policy_builders), the jobs already running, the jobs
waiting, and what must come out: which jobs start where (on which GPUs), and why each other one
waits (its code and words of its message).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import TypeVar

import pytest
from policy_builders import (
    A100,
    H100,
    demo_node,
    mesh,
    mixed_gpus,
    node,
    pending,
    res,
    running,
)

from gpupool.core.hardware import LinkKind, Node
from gpupool.core.job import Resources
from gpupool.policy import (
    Code,
    Decision,
    PendingJob,
    RunningJob,
    Snapshot,
    Status,
    check_satisfiable,
    decide,
)
from gpupool.policy.ordering import rank
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.render import status_text

J = TypeVar("J", PendingJob, RunningJob)


def limited(job: J, limit_s: float) -> J:
    """`job` with a time limit (backfill needs one; without it, the config's default)."""
    return replace(job, time_limit_s=limit_s)


# Expected GPUs of a start: an exact tuple, a frozenset of acceptable tuples (ties the policy
# may break either way), or None (any set of the right size).
Gpus = tuple[int, ...] | frozenset[tuple[int, ...]] | None


def one_of(*choices: tuple[int, ...]) -> frozenset[tuple[int, ...]]:
    return frozenset(choices)


def pairs_within(*groups: range) -> frozenset[tuple[int, ...]]:
    return frozenset(p for g in groups for p in combinations(g, 2))


def singles(*indices: int) -> frozenset[tuple[int, ...]]:
    return frozenset((i,) for i in indices)


@dataclass(frozen=True)
class Wait:
    code: Code
    says: tuple[str, ...] = ()  # substrings the message must contain
    short: Insufficient | None = None  # the binding dimension and its figures, as data


def wait(code: Code, *says: str, short: Insufficient | None = None) -> Wait:
    return Wait(code, says, short)


@dataclass(frozen=True)
class Case:
    id: str
    nodes: tuple[Node, ...]
    pending: tuple[PendingJob, ...] = ()
    running: tuple[RunningJob, ...] = ()
    starts: Mapping[int, tuple[str, Gpus]] = field(default_factory=dict)
    waits: Mapping[int, Wait] = field(default_factory=dict)


CASES = [
    # --- the queue -------------------------------------------------------------------------
    Case("empty queue", nodes=(demo_node(),)),
    Case(
        "empty queue, busy pool",
        nodes=(demo_node(),),
        running=(running(100, "gpu0", range(8)),),
    ),
    Case(
        "one job fits",
        nodes=(node("solo", 1),),
        pending=(pending(1, 1),),
        starts={1: ("solo", (0,))},
    ),
    Case(
        "running jobs' GPUs are not handed out again",
        nodes=(node("a", 2),),
        running=(running(100, "a", [0]),),
        pending=(pending(1, 1),),
        starts={1: ("a", (1,))},
    ),
    Case(
        "priority beats submit order",
        nodes=(node("solo", 1),),
        pending=(pending(1, 1, prio=200, t=0.0), pending(2, 1, prio=300, t=5.0)),
        starts={2: ("solo", (0,))},
        waits={1: wait(Code.RESOURCES, "node solo: needs 1 GPU, 0 free")},
    ),
    Case(
        "FIFO among equal priority (submit time, not id)",
        nodes=(node("solo", 1),),
        pending=(pending(1, 1, t=5.0), pending(2, 1, t=0.0)),
        starts={2: ("solo", (0,))},
        waits={1: wait(Code.RESOURCES)},
    ),
    Case(
        "equal priority and submit time: lower id first",
        nodes=(node("solo", 1),),
        pending=(pending(7, 1, t=3.0), pending(4, 1, t=3.0)),
        starts={4: ("solo", (0,))},
        waits={7: wait(Code.RESOURCES)},
    ),
    Case(
        "head blocked: later jobs that would delay its reservation get Priority",
        nodes=(node("box", 4),),
        running=(limited(running(100, "box", [0, 1]), 3600.0),),
        pending=(
            pending(1, 4, prio=300),
            limited(pending(2, 1), 7200.0),
            limited(pending(3, 2), 7200.0),
        ),
        waits={
            1: wait(Code.RESOURCES, "node box: needs 4 GPUs, 2 free", "reserved GPUs 0,1,2,3"),
            2: wait(Code.PRIORITY, "waiting for job 1", "would still be running then"),
            3: wait(Code.PRIORITY, "waiting for job 1"),
        },
    ),
    Case(
        "blocked high-priority head holds back an older low-priority job that would delay it",
        nodes=(node("box", 4),),
        running=(running(100, "box", [0]),),  # no limit: ends after the default, 24h
        pending=(limited(pending(1, 1, prio=100, t=0.0), 2 * 86400.0), pending(2, 4, prio=300)),
        waits={
            2: wait(Code.RESOURCES, "needs 4 GPUs, 3 free", "on box from now+1d0h"),
            1: wait(Code.PRIORITY, "waiting for job 2"),
        },
    ),
    Case(
        "a job that ends before the head's reservation backfills onto the reserved GPUs",
        nodes=(node("box", 4),),
        running=(running(100, "box", [0]),),
        pending=(limited(pending(1, 1, prio=100, t=0.0), 3600.0), pending(2, 4, prio=300)),
        starts={1: ("box", singles(1, 2, 3))},
        waits={2: wait(Code.RESOURCES, "needs 4 GPUs, 3 free")},
    ),
    Case(
        "jobs ahead of the blocked one still start",
        nodes=(node("box", 4),),
        pending=(
            pending(1, 2, prio=300),
            pending(2, 4, prio=200),
            limited(pending(3, 1, prio=100), 2 * 86400.0),
        ),
        starts={1: ("box", None)},
        waits={
            2: wait(Code.RESOURCES, "node box: needs 4 GPUs, 2 free"),
            3: wait(Code.PRIORITY, "waiting for job 2"),
        },
    ),
    # --- GPUs on a node: NVLink islands ----------------------------------------------------
    Case(
        "4-GPU job on an empty demo node takes one whole NVLink island",
        nodes=(demo_node(),),
        pending=(pending(1, 4),),
        starts={1: ("gpu0", one_of((0, 1, 2, 3), (4, 5, 6, 7)))},
    ),
    Case(
        "two 4-GPU jobs take one island each",
        nodes=(demo_node(),),
        pending=(pending(1, 4), pending(2, 4)),
        starts={
            1: ("gpu0", one_of((0, 1, 2, 3), (4, 5, 6, 7))),
            2: ("gpu0", one_of((0, 1, 2, 3), (4, 5, 6, 7))),
        },
    ),
    Case(
        "2-GPU job with GPUs 0 and 4 busy takes an NVLink pair, not {1,5}",
        nodes=(demo_node(),),
        running=(running(100, "gpu0", [0]), running(101, "gpu0", [4])),
        pending=(pending(1, 2),),
        starts={1: ("gpu0", pairs_within(range(1, 4), range(5, 8)))},
    ),
    Case(
        "4-GPU job that must span islands keeps 3 on one island (smallest link sum)",
        nodes=(demo_node(),),
        running=(running(100, "gpu0", [0]), running(101, "gpu0", [4])),
        pending=(pending(1, 4),),
        starts={
            1: (
                "gpu0",
                one_of(
                    *[(1, 2, 3, b) for b in (5, 6, 7)],
                    *[(a, 5, 6, 7) for a in (1, 2, 3)],
                ),
            )
        },
    ),
    Case(
        "link quality comes before keeping a big NVLink block free",
        nodes=(node("n", 6, links=mesh(LinkKind.NVLINK, range(4)) + mesh(LinkKind.PIX, [4, 5])),),
        pending=(pending(1, 2),),
        starts={1: ("n", pairs_within(range(4)))},
    ),
    Case(
        "same worst link: the smaller sum of links wins over fragmentation",
        # {0,1,2} NVLink, {3,4,5} PHB, SYS across: 3+1 sums 15, 1+3 sums 24 (but leaves 2 on NVLink)
        nodes=(
            node("n", 6, links=mesh(LinkKind.NVLINK, range(3)) + mesh(LinkKind.PHB, range(3, 6))),
        ),
        pending=(pending(1, 4),),
        starts={1: ("n", one_of((0, 1, 2, 3), (0, 1, 2, 4), (0, 1, 2, 5)))},
    ),
    Case(
        "1-GPU jobs pack into the used island, keeping a full island free",
        nodes=(demo_node(),),
        running=(running(100, "gpu0", [0]),),
        pending=(pending(1, 1), pending(2, 1), pending(3, 1)),
        starts={
            1: ("gpu0", singles(1, 2, 3)),
            2: ("gpu0", singles(1, 2, 3)),
            3: ("gpu0", singles(1, 2, 3)),
        },
    ),
    Case(
        "1-GPU job goes to the island with fewer free GPUs",
        nodes=(demo_node(),),
        running=(running(100, "gpu0", [0]), running(101, "gpu0", [4, 5])),
        pending=(pending(1, 1),),
        starts={1: ("gpu0", singles(6, 7))},
    ),
    # --- which node: best fit --------------------------------------------------------------
    Case(
        "best fit: job goes to the node with fewer free GPUs that still fits",
        nodes=(node("big", 8), node("small", 4)),
        running=(running(100, "small", [0, 1]),),
        pending=(pending(1, 2),),
        starts={1: ("small", (2, 3))},
    ),
    Case(
        "best fit skips the fuller node when the job does not fit there",
        nodes=(node("big", 8), node("small", 4)),
        running=(running(100, "small", [0, 1]),),
        pending=(pending(1, 3),),
        starts={1: ("big", None)},
    ),
    Case(
        "best fit counts free GPUs, not node size",
        nodes=(node("a", 8), node("b", 4)),
        running=(running(100, "a", range(6)),),
        pending=(pending(1, 2),),
        starts={1: ("a", (6, 7))},
    ),
    Case(
        "whole job on one node: 2+2 free across nodes does not run a 4-GPU job",
        nodes=(node("a", 4), node("b", 4)),
        running=(running(100, "a", [0, 1]), running(101, "b", [0, 1])),
        pending=(pending(1, 4),),
        waits={
            1: wait(
                Code.RESOURCES,
                "node a: needs 4 GPUs, 2 free",
                short=Insufficient("a", Dimension.GPU_COUNT, 4, 2, 4),
            )
        },
    ),
    # --- GPU type ---------------------------------------------------------------------------
    Case(
        "gpu_type picks the node with that model over the better fit",
        nodes=(node("a100", 4, A100), node("h100", 4, H100)),
        running=(running(100, "a100", [0, 1]),),
        pending=(pending(1, 1, gpu_type="H100"), pending(2, 1)),
        starts={1: ("h100", None), 2: ("a100", None)},
    ),
    Case(
        "gpu_type on a mixed-model node uses only the matching GPUs",
        nodes=(node("mix", gpu_list=mixed_gpus(A100, A100, H100, H100)),),
        pending=(pending(1, 2, gpu_type="H100"), pending(2, 1, gpu_type="a100-80gb")),
        starts={1: ("mix", (2, 3)), 2: ("mix", singles(0, 1))},
    ),
    Case(
        "mixed node: free GPUs of another model do not count",
        nodes=(node("mix", gpu_list=mixed_gpus(A100, A100, H100, H100)),),
        running=(running(100, "mix", [2]),),
        pending=(pending(1, 2, gpu_type="H100"),),
        waits={1: wait(Code.RESOURCES, "node mix: needs 2 H100 GPUs, 1 free")},
    ),
    # --- CPUs and memory --------------------------------------------------------------------
    Case(
        "CPU limit on a declared node",
        nodes=(node("a", 4, cpus=16),),
        running=(running(100, "a", [0], cpus=12),),
        pending=(pending(1, 1, cpus=8),),
        waits={1: wait(Code.RESOURCES, "node a: needs 8 CPUs, 4 free")},
    ),
    Case(
        "CPU limit counts jobs started earlier in the same pass",
        nodes=(node("a", 4, cpus=16),),
        pending=(pending(1, 1, cpus=10), pending(2, 1, cpus=10)),
        starts={1: ("a", None)},
        waits={2: wait(Code.RESOURCES, "node a: needs 10 CPUs, 6 free")},
    ),
    Case(
        "CPUs not checked on a node that declares 0",
        nodes=(node("a", 4, cpus=0),),
        running=(running(100, "a", [0], cpus=500),),
        pending=(pending(1, 1, cpus=64),),
        starts={1: ("a", None)},
    ),
    Case(
        "job needing CPUs skips the better-fit node that lacks them",
        nodes=(node("a", 4, cpus=8), node("b", 4, cpus=64)),
        running=(running(100, "a", [0, 1]),),
        pending=(pending(1, 1, cpus=32),),
        starts={1: ("b", None)},
    ),
    Case(
        "memory limit on a declared node",
        nodes=(node("a", 4, mem_gb=256),),
        running=(running(100, "a", [0], mem_gb=200),),
        pending=(pending(1, 1, mem_gb=100),),
        waits={1: wait(Code.RESOURCES, "node a: needs 102400 MiB memory, 57344 MiB free")},
    ),
    Case(
        "memory not checked on a node that declares 0",
        nodes=(node("a", 4, mem_gb=0),),
        running=(running(100, "a", [0], mem_gb=4096),),
        pending=(pending(1, 1, mem_gb=2048),),
        starts={1: ("a", None)},
    ),
    # --- reasons ----------------------------------------------------------------------------
    Case(
        "a reason that counts GPUs names the node with the most free, and its figures",
        nodes=(node("a", 4), node("b", 2)),
        running=(running(100, "a", [0]),),
        pending=(pending(1, 4),),
        waits={
            1: wait(
                Code.RESOURCES,
                "node a: needs 4 GPUs, 3 free (no node has more)",
                short=Insufficient("a", Dimension.GPU_COUNT, 4, 3, 4),
            )
        },
    ),
    Case(
        "a reason on more than GPUs names each node's binding check; the closest binds",
        nodes=(node("a", 4, cpus=16), node("b", 2, cpus=64)),
        running=(running(100, "a", [0], cpus=14),),
        pending=(pending(1, 2, cpus=8),),
        starts={1: ("b", (0, 1))},
    ),
    Case(
        "each node's binding check, by dimension",
        nodes=(node("a", 4, cpus=16), node("b", 2, cpus=64)),
        running=(running(100, "a", [0], cpus=14),),
        pending=(pending(1, 3, cpus=8),),
        waits={
            1: wait(
                Code.RESOURCES,
                "node a: needs 8 CPUs, 2 free",
                "node b: needs 3 GPUs, 2 free",
                short=Insufficient("a", Dimension.CPUS, 8, 2, 16),
            )
        },
    ),
    Case(
        "unsatisfiable job is reported as such and does not block the queue",
        nodes=(demo_node(),),
        pending=(pending(1, 16), pending(2, 1)),
        starts={2: ("gpu0", None)},
        waits={1: wait(Code.UNSATISFIABLE, "needs 16 GPUs", "has 8")},
    ),
    Case(
        "unknown GPU type is Unsatisfiable, not Resources",
        nodes=(demo_node(),),
        pending=(pending(1, 1, gpu_type="H100"),),
        waits={1: wait(Code.UNSATISFIABLE, "unknown GPU type 'H100'", "A100-80GB")},
    ),
    # --- CPU-only jobs ----------------------------------------------------------------------
    Case(
        "0-GPU job starts with no GPUs, even on a node whose GPUs are all busy",
        nodes=(node("a", 2),),
        running=(running(100, "a", [0, 1]),),
        pending=(pending(1, 0, cpus=4),),
        starts={1: ("a", ())},
    ),
    Case(
        "0-GPU job still respects declared CPUs",
        nodes=(node("a", 2, cpus=8),),
        running=(running(100, "a", [0], cpus=8),),
        pending=(pending(1, 0, cpus=4),),
        waits={1: wait(Code.RESOURCES, "node a: needs 4 CPUs, 0 free")},
    ),
]


def _assert_no_gpu_twice(case: Case, decision: Decision) -> None:
    held: dict[tuple[str, int], int] = {}
    for r in case.running:
        for g in r.gpus:
            held[(r.node, g)] = r.id
    for s in decision.starts:
        for g in s.gpus:
            assert (s.node, g) not in held, (
                f"job {s.job_id} got {s.node}:{g}, already held by job {held[(s.node, g)]}"
            )
            held[(s.node, g)] = s.job_id


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decide(case: Case) -> None:
    decision = decide(Snapshot(nodes=case.nodes, pending=case.pending, running=case.running), 0.0)

    got = {s.job_id: (s.node, s.gpus) for s in decision.starts}
    assert sorted(got) == sorted(case.starts), f"started {got}"
    wanted_gpus = {p.id: p.resources.gpus for p in case.pending}
    for job_id, (want_node, want_gpus) in case.starts.items():
        got_node, got_gpus = got[job_id]
        assert got_node == want_node, f"job {job_id} on {got_node}, wanted {want_node}"
        assert len(got_gpus) == wanted_gpus[job_id]
        if isinstance(want_gpus, frozenset):
            assert got_gpus in want_gpus, f"job {job_id} got GPUs {got_gpus}"
        elif want_gpus is not None:
            assert got_gpus == want_gpus, f"job {job_id} got GPUs {got_gpus}"
    _assert_no_gpu_twice(case, decision)

    assert sorted(decision.pending) == sorted(case.waits), f"pending {dict(decision.pending)}"
    for job_id, want in case.waits.items():
        status = decision.pending[job_id]
        assert status.code is want.code, f"job {job_id}: {status}"
        for words in want.says:
            assert words in status_text(status), f"job {job_id}: {status_text(status)!r}"


# --- starts come out in queue order, and `now` does not change the decision -------------------


def test_starts_are_listed_in_queue_order() -> None:
    snap = Snapshot(
        nodes=(demo_node(),),
        pending=(pending(3, 1, t=0.0), pending(1, 1, t=2.0), pending(2, 1, prio=400, t=5.0)),
    )
    assert [s.job_id for s in decide(snap, 0.0).starts] == [2, 3, 1]


def test_only_differences_of_times_matter_and_the_snapshot_is_not_mutated() -> None:
    def snap(t0: float) -> Snapshot:
        return Snapshot(
            nodes=(demo_node(cpus=32),),
            running=(replace(running(100, "gpu0", [0], cpus=4), start_time=t0),),
            pending=(
                pending(1, 2, cpus=8, t=t0 + 1.0),
                pending(2, 8, t=t0 + 2.0),
                pending(3, 1, t=t0 + 3.0),
            ),
        )

    def back(status: Status, by: float) -> Status:
        """The status with its reservation's time `by` earlier (all else is relative)."""
        if status.reserved is None:
            return status
        r = status.reserved.reservation
        moved = replace(status.reserved, reservation=replace(r, time=r.time - by))
        return replace(status, reserved=moved)

    base = snap(0.0)
    first = decide(base, 10.0)
    shifted = decide(snap(1e6), 1e6 + 10.0)
    assert shifted.starts == first.starts
    assert {j: back(s, 1e6) for j, s in shifted.pending.items()} == first.pending
    assert shifted.priorities == first.priorities
    assert [replace(r, time=r.time - 1e6) for r in shifted.reservations] == list(first.reservations)
    assert {j: t - 1e6 for j, t in shifted.estimated_start.items()} == first.estimated_start
    assert base.used_gpus() == {"gpu0": {0}}
    assert decide(base, 10.0) == first


def test_queue_order_priority_then_submit_time_then_id() -> None:
    jobs = [
        pending(5, prio=200, t=1.0),
        pending(2, prio=200, t=1.0),
        pending(9, prio=100, t=0.0),
        pending(7, prio=300, t=8.0),
        pending(1, prio=200, t=3.0),
    ]
    assert [j.id for j in rank(Snapshot(nodes=(), pending=tuple(jobs)), 0.0)[0]] == [7, 2, 5, 1, 9]


# --- check_satisfiable: refused at submit -----------------------------------------------------


@dataclass(frozen=True)
class SatCase:
    id: str
    nodes: tuple[Node, ...]
    request: Resources
    source: str | None  # the binding dimension (or rule); None: satisfiable
    says: tuple[str, ...] = ()


SAT_CASES = [
    SatCase("fits an empty node", (demo_node(),), res(8), None),
    SatCase("0-GPU job", (demo_node(),), res(0, cpus=4), None),
    SatCase(
        "too many GPUs",
        (demo_node("gpu0"), node("small", 2)),
        res(16),
        "gpu_count",
        ("needs 16 GPUs on one node", "largest node (gpu0) has 8"),
    ),
    SatCase(
        "enough GPUs in the pool but not on one node",
        (node("a", 4), node("b", 4)),
        res(6),
        "gpu_count",
        ("needs 6 GPUs", "has 4"),
    ),
    SatCase(
        "unknown GPU type",
        (demo_node(),),
        res(1, gpu_type="H100"),
        "gpu_type",
        ("unknown GPU type 'H100': this pool has A100-80GB",),
    ),
    SatCase(
        "GPU type matched by family", (node("a", 2, "NVIDIA A100-SXM4-80GB"),), res(2, "A100"), None
    ),
    SatCase(
        "too many GPUs of the requested type",
        (node("a", 8, A100), node("h", 4, H100)),
        res(5, gpu_type="H100"),
        "gpu_count",
        ("needs 5 H100 GPUs on one node", "largest node (h) has 4"),
    ),
    SatCase(
        "too many CPUs",
        (node("a", 8, cpus=64),),
        res(1, cpus=128),
        "cpus",
        ("needs 128 CPUs on one node", "has 64"),
    ),
    SatCase(
        "the node with enough CPUs lacks the GPUs",
        (node("a", 8, cpus=16), node("b", 1, cpus=128)),
        res(4, cpus=64),
        "cpus",
        ("needs 64 CPUs", "has 16"),
    ),
    SatCase(
        "CPUs undeclared: never refused for CPUs",
        (node("a", 8, cpus=0),),
        res(1, cpus=10_000),
        None,
    ),
    SatCase(
        "too much memory",
        (node("a", 8, mem_gb=512),),
        res(1, mem_gb=1024),
        "memory",
        ("needs 1TiB memory on one node", "has 512GiB"),
    ),
    SatCase(
        "memory undeclared: never refused for memory", (node("a", 8),), res(1, mem_gb=1 << 20), None
    ),
    SatCase(
        "CPUs on one node, memory on another: no node has both",
        (node("a", 1, cpus=64, mem_gb=64), node("b", 1, cpus=8, mem_gb=512)),
        res(1, cpus=32, mem_gb=256),
        "memory",
        ("needs 256GiB memory",),
    ),
    SatCase(
        "CPUs and memory on the same node",
        (node("a", 1, cpus=64, mem_gb=64), node("b", 1, cpus=64, mem_gb=512)),
        res(1, cpus=32, mem_gb=256),
        None,
    ),
    SatCase("a pool with no nodes", (), res(1), "no_nodes", ("no nodes",)),
]


@pytest.mark.parametrize("case", SAT_CASES, ids=[c.id for c in SAT_CASES])
def test_check_satisfiable(case: SatCase) -> None:
    status = check_satisfiable(case.request, case.nodes)
    if case.source is None:
        assert status is None
        # Satisfiable means: alone on the empty pool, it starts.
        decision = decide(
            Snapshot(nodes=case.nodes, pending=(PendingJob(1, case.request, 200, 0.0),)), 0.0
        )
        assert [s.job_id for s in decision.starts] == [1], decision
        return
    assert status is not None
    assert status.code is Code.UNSATISFIABLE
    assert status.unresolvable
    assert status.source == case.source
    for words in case.says:
        assert words in status_text(status), status_text(status)


def test_unsatisfiable_status_is_what_decide_reports() -> None:
    nodes = (demo_node(),)
    request = res(9)
    decision = decide(Snapshot(nodes=nodes, pending=(PendingJob(1, request, 200, 0.0),)), 0.0)
    assert decision.pending[1] == check_satisfiable(request, nodes)
