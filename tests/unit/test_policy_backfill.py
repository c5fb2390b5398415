"""EASY backfill, --begin holds and start estimates in `decide`.

Table-driven cases (cluster + running jobs with time limits + pending jobs -> starts, waits
and the one reservation), then a property checked by simulation: with exact time limits, the
job that gets the reservation at time T starts by T, whatever backfills around it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_builders import demo_node, node, pending, running

from gpupool.core.hardware import Gpu, Link, LinkKind, Node
from gpupool.core.job import Resources
from gpupool.policy import Code, PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PolicyConfig

GiB = 1 << 30


def job(job_id: int, gpus: int = 0, limit: float | None = None, **kw: object) -> PendingJob:
    """A pending job with a time limit (None: the config's default) and builder options."""
    begin = kw.pop("begin", None)
    base = pending(job_id, gpus, **kw)  # type: ignore[arg-type]
    return replace(base, time_limit_s=limit, begin_time=begin)


def busy(
    job_id: int, node_name: str, gpus: list[int], ends: float, *, start: float = 0.0, **kw: object
) -> RunningJob:
    """A running job started at `start` whose time limit makes it end at `ends`."""
    base = running(job_id, node_name, gpus, **kw)  # type: ignore[arg-type]
    return replace(base, start_time=start, time_limit_s=ends - start)


@dataclass(frozen=True)
class Expect:
    code: Code
    says: tuple[str, ...] = ()


def wait(code: Code, *says: str) -> Expect:
    return Expect(code, says)


@dataclass(frozen=True)
class Case:
    id: str
    nodes: tuple[Node, ...]
    pending: tuple[PendingJob, ...]
    running: tuple[RunningJob, ...] = ()
    now: float = 0.0
    default_limit: float = 86400.0
    starts: Mapping[int, tuple[str, tuple[int, ...] | None]] = field(default_factory=dict)
    waits: Mapping[int, Expect] = field(default_factory=dict)
    # (job, node, GPUs or None for any, time) of the one reservation; None: no reservation.
    reserved: tuple[int, str, tuple[int, ...] | None, float] | None = None
    estimated: Mapping[int, float] = field(default_factory=dict)


HIGH = 300  # the head of the queue in these cases; the other jobs are "normal" (200)

CASES = [
    Case(
        "a small job backfills onto a GPU the head's reservation does not use",
        # 0,1,2 free up at 100: the 4-GPU head gets island 0-3 then; GPU 7 is not reserved.
        nodes=(demo_node("box"),),
        running=(busy(100, "box", [0, 1, 2], 100.0), busy(101, "box", [4, 5, 6], 1000.0)),
        pending=(job(1, 4, prio=HIGH), job(2, 1, limit=5000.0)),
        starts={2: ("box", (7,))},
        waits={1: wait(Code.RESOURCES, "node box: needs 4 GPUs, 2 free", "reserved GPUs 0,1,2,3")},
        reserved=(1, "box", (0, 1, 2, 3), 100.0),
        estimated={1: 100.0},
    ),
    Case(
        "a small job backfills onto another node than the reserved one",
        nodes=(node("a", 4), node("b", 4)),
        running=(busy(100, "a", [0, 1, 2], 100.0), busy(101, "b", [0, 1], 500.0)),
        pending=(job(1, 4, prio=HIGH), job(2, 1, limit=5000.0)),
        starts={2: ("b", None)},
        waits={1: wait(Code.RESOURCES)},
        reserved=(1, "a", (0, 1, 2, 3), 100.0),
    ),
    Case(
        "a small job that would run past the reservation on reserved GPUs waits with Priority",
        nodes=(node("box", 4),),
        running=(busy(100, "box", [0, 1, 2], 100.0),),
        pending=(job(1, 4, prio=HIGH), job(2, 1, limit=200.0)),
        waits={
            1: wait(Code.RESOURCES, "needs 4 GPUs, 1 free", "on box from now+1m40s"),
            2: wait(
                Code.PRIORITY,
                "waiting for job 1, which holds a reservation",
                "(reserved GPUs 0,1,2,3 on box from now+1m40s)",
                "fits now only on what is reserved, and would still be running then",
            ),
        },
        reserved=(1, "box", (0, 1, 2, 3), 100.0),
    ),
    Case(
        "a short job on reserved GPUs that ends before the reservation starts now",
        nodes=(node("box", 4),),
        running=(busy(100, "box", [0, 1, 2], 100.0),),
        pending=(job(1, 4, prio=HIGH), job(2, 1, limit=50.0)),
        starts={2: ("box", (3,))},
        waits={1: wait(Code.RESOURCES)},
        reserved=(1, "box", (0, 1, 2, 3), 100.0),
    ),
    Case(
        "ending exactly at the reservation time does not delay it",
        nodes=(node("box", 4),),
        running=(busy(100, "box", [0, 1, 2], 100.0),),
        pending=(job(1, 4, prio=HIGH), job(2, 1, limit=60.0)),
        now=40.0,
        starts={2: ("box", (3,))},
        waits={1: wait(Code.RESOURCES, "from now+1m00s")},
        reserved=(1, "box", (0, 1, 2, 3), 100.0),
    ),
    Case(
        "jobs without a time limit use default_time_limit_s: running job ends at start+default",
        nodes=(node("box", 4),),
        running=(replace(running(100, "box", [0, 1, 2]), start_time=-20.0),),
        pending=(job(1, 4, prio=HIGH), job(2, 1)),  # 2 would end at 50 > 30
        default_limit=50.0,
        waits={1: wait(Code.RESOURCES), 2: wait(Code.PRIORITY, "would still be running then")},
        reserved=(1, "box", (0, 1, 2, 3), 30.0),
    ),
    Case(
        "jobs without a time limit use default_time_limit_s: a pending one may fit the gap",
        nodes=(node("box", 4),),
        running=(busy(100, "box", [0, 1, 2], 100.0),),
        pending=(job(1, 4, prio=HIGH), job(2, 1)),
        default_limit=90.0,
        starts={2: ("box", (3,))},
        waits={1: wait(Code.RESOURCES)},
        reserved=(1, "box", (0, 1, 2, 3), 100.0),
    ),
    Case(
        "a job held by --begin waits with BeginTime and blocks nobody",
        nodes=(node("box", 4),),
        pending=(job(1, 4, prio=HIGH, begin=500.0), job(2, 4, limit=10_000.0)),
        starts={2: ("box", (0, 1, 2, 3))},
        waits={1: wait(Code.BEGIN_TIME, "held until its --begin time")},
        estimated={1: 500.0},
    ),
    Case(
        "a --begin time that has passed holds nothing",
        nodes=(node("box", 4),),
        pending=(job(1, 4, begin=5.0),),
        now=10.0,
        starts={1: ("box", (0, 1, 2, 3))},
    ),
    Case(
        "the reservation goes to the node where enough GPUs free up first",
        nodes=(node("a", 4), node("b", 4)),
        running=(busy(100, "a", [0, 1, 2, 3], 300.0), busy(101, "b", [0, 1, 2, 3], 100.0)),
        pending=(job(1, 2),),
        waits={1: wait(Code.RESOURCES, "node a: needs 2 GPUs, 0 free", "on b from now+1m40s")},
        reserved=(1, "b", None, 100.0),
        estimated={1: 100.0},
    ),
    Case(
        "the reservation time is when enough GPUs are free, not when the first one is",
        nodes=(node("box", 4),),
        running=(
            busy(100, "box", [0], 50.0),
            busy(101, "box", [1], 80.0),
            busy(102, "box", [2, 3], 200.0),
        ),
        pending=(job(1, 2),),
        waits={1: wait(Code.RESOURCES, "reserved GPUs 0,1 on box from now+1m20s")},
        reserved=(1, "box", (0, 1), 80.0),
    ),
    Case(
        "a running job past its expected end counts as ending now",
        nodes=(node("box", 4),),
        running=(busy(100, "box", [0, 1, 2], 50.0, start=-100.0),),
        pending=(job(1, 4, prio=HIGH), job(2, 1, limit=1.0)),
        now=60.0,
        waits={
            1: wait(Code.RESOURCES, "as soon as jobs past their time limit there end"),
            2: wait(Code.PRIORITY, "waiting for job 1"),
        },
        reserved=(1, "box", (0, 1, 2, 3), 60.0),
    ),
    Case(
        "jobs started earlier in the same pass count in the reservation time",
        # Job 2's short limit keeps it ahead of job 3 by service too (ordering.py: 4 GPUs x
        # 100 s < 2 x 400 s), so it is the blocked head the case is about.
        nodes=(node("box", 4),),
        pending=(
            job(1, 2, prio=HIGH, limit=300.0),
            job(2, 4, limit=100.0),
            job(3, 2, limit=400.0),
        ),
        starts={1: ("box", None)},
        waits={2: wait(Code.RESOURCES, "from now+5m00s"), 3: wait(Code.PRIORITY, "job 2")},
        reserved=(2, "box", (0, 1, 2, 3), 300.0),
    ),
    Case(
        "only the first blocked job gets a reservation; a later one that fits nowhere: Resources",
        nodes=(node("box", 4),),
        running=(busy(100, "box", [0, 1, 2, 3], 100.0),),
        pending=(job(1, 4, prio=HIGH), job(2, 2, limit=10.0)),
        waits={
            1: wait(Code.RESOURCES, "reserved GPUs 0,1,2,3"),
            2: wait(Code.RESOURCES, "node box: needs 2 GPUs, 0 free (no node has more)"),
        },
        reserved=(1, "box", (0, 1, 2, 3), 100.0),
    ),
    Case(
        "unsatisfiable jobs block nobody and get no reservation",
        nodes=(node("box", 4),),
        pending=(job(1, 16, prio=HIGH), job(2, 4, limit=10_000.0)),
        starts={2: ("box", (0, 1, 2, 3))},
        waits={1: wait(Code.UNSATISFIABLE, "needs 16 GPUs")},
    ),
    Case(
        "a long job on the reserved node may use only the CPUs spare at the reservation time",
        # At 100 the node has 16 CPUs free, the head needs 12: 4 are spare for long jobs.
        nodes=(node("box", 4, cpus=16), node("other", 1, cpus=2)),
        running=(busy(100, "box", [0, 1, 2], 100.0, cpus=8), busy(101, "other", [0], 1e9)),
        pending=(
            job(1, 4, prio=HIGH, cpus=12),
            job(2, 0, limit=5000.0, cpus=6),
            job(3, 0, limit=5000.0, cpus=4),
            job(4, 0, limit=50.0, cpus=4),
        ),
        starts={3: ("box", ()), 4: ("box", ())},
        waits={1: wait(Code.RESOURCES), 2: wait(Code.PRIORITY, "waiting for job 1")},
        reserved=(1, "box", (0, 1, 2, 3), 100.0),
    ),
    Case(
        "a job that does not fit now at all waits with Resources, naming each node",
        nodes=(node("box", 4, cpus=16),),
        running=(busy(100, "box", [0], 100.0, cpus=4),),
        pending=(job(1, 4, prio=HIGH), job(2, 1, limit=10.0, cpus=16)),
        waits={
            1: wait(Code.RESOURCES),
            2: wait(Code.RESOURCES, "node box: needs 16 CPUs, 12 free"),
        },
        reserved=(1, "box", (0, 1, 2, 3), 100.0),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_backfill(case: Case) -> None:
    config = PolicyConfig(default_time_limit_s=case.default_limit)
    snap = Snapshot(nodes=case.nodes, pending=case.pending, running=case.running, config=config)
    d = decide(snap, case.now)

    got = {s.job_id: (s.node, s.gpus) for s in d.starts}
    assert sorted(got) == sorted(case.starts), f"started {got}, pending {dict(d.pending)}"
    for job_id, (want_node, want_gpus) in case.starts.items():
        assert got[job_id][0] == want_node, got
        if want_gpus is not None:
            assert got[job_id][1] == want_gpus, got

    assert sorted(d.pending) == sorted(case.waits), f"pending {dict(d.pending)}"
    for job_id, want in case.waits.items():
        status = d.pending[job_id]
        assert status.code is want.code, f"job {job_id}: {status}"
        for words in want.says:
            assert words in status_text(status), f"job {job_id}: {status_text(status)!r}"

    if case.reserved is None:
        assert d.reservations == ()
    else:
        assert len(d.reservations) == 1, d.reservations
        r = d.reservations[0]
        job_id, want_node, want_gpus, want_time = case.reserved
        assert (r.job_id, r.node, r.time) == (job_id, want_node, want_time), r
        if want_gpus is not None:
            assert r.gpus == want_gpus, r
        assert d.estimated_start[job_id] == want_time
    for job_id, at in case.estimated.items():
        assert d.estimated_start[job_id] == at


# --- the reserved job is never delayed by backfilled jobs when time limits are exact ----------

MODELS = ("A100-80GB", "NVIDIA H100 80GB HBM3")
DEFAULT_LIMIT = 60.0


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    """1-3 nodes of 1-8 GPUs; running jobs with exact ends in (0, 200]; pending jobs with
    time limits (or the default), CPUs and memory, no --begin (a job released by --begin
    would rightly jump ahead of the reserved one)."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    nodes: list[Node] = []
    running_jobs: list[RunningJob] = []
    for n in range(draw(st.integers(1, 3))):
        count = rnd.randint(1, 8)
        model = rnd.choice(MODELS)
        gpus = tuple(Gpu(i, model, 80 * GiB) for i in range(count))
        links = tuple(
            Link(a, b, rnd.choice(list(LinkKind))) for a, b in combinations(range(count), 2)
        )
        cpus, mem = rnd.choice([0, 8, 16]), rnd.choice([0, 256 * GiB])
        nodes.append(Node(f"n{n}", gpus, links, cpus=cpus, memory_bytes=mem))
        owners = [rnd.choice([None, 0, 1, 2]) for _ in range(count)]
        for owner in sorted({o for o in owners if o is not None}):
            held = tuple(i for i, o in enumerate(owners) if o == owner)
            start = -float(rnd.randint(0, 50))
            request = Resources(len(held), None, rnd.choice([None, 2, 4]), rnd.choice([None, GiB]))
            limit = float(rnd.randint(1, 200)) - start
            running_jobs.append(
                RunningJob(1000 + len(running_jobs), f"n{n}", held, request, start, 200)
            )
            running_jobs[-1] = replace(running_jobs[-1], time_limit_s=limit)
    jobs = draw(
        st.lists(
            st.tuples(
                st.integers(0, 8),
                st.sampled_from([None, None, "A100", "H100"]),
                st.sampled_from([None, 2, 4, 8]),
                st.sampled_from([None, None, 64 * GiB]),
                st.sampled_from([100, 200, 300]),
                st.sampled_from([None, 5.0, 30.0, 100.0, 300.0]),
                st.integers(-20, 0),
            ),
            min_size=1,
            max_size=10,
        )
    )
    pending_jobs = tuple(
        PendingJob(i + 1, Resources(g, ty, c, m), prio, float(t), time_limit_s=limit)
        for i, (g, ty, c, m, prio, limit, t) in enumerate(jobs)
    )
    config = PolicyConfig(default_time_limit_s=DEFAULT_LIMIT)
    return Snapshot(tuple(nodes), pending_jobs, tuple(running_jobs), config=config)


def _end(start: float, limit: float | None) -> float:
    return start + (DEFAULT_LIMIT if limit is None else limit)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_the_reserved_job_is_never_delayed_by_backfilled_jobs_when_limits_are_exact(
    snap: Snapshot,
) -> None:
    """Run decide() at time 0, then at every job end (jobs end exactly at start + limit),
    starting what it says: the job reserved at time T at the first pass starts by T."""
    now = 0.0
    decision = decide(snap, now)
    if not decision.reservations:
        return
    reservation = decision.reservations[0]
    waiting = {j.id: j for j in snap.pending}
    live = list(snap.running)
    while True:
        for s in decision.starts:
            if s.job_id == reservation.job_id:
                assert now <= reservation.time
                return
            j = waiting.pop(s.job_id)
            live.append(
                RunningJob(
                    j.id, s.node, s.gpus, j.resources, now, 200, "", "default", j.time_limit_s
                )
            )
        ends = [_end(r.start_time, r.time_limit_s) for r in live]
        assert ends, f"job {reservation.job_id} never started: {dict(decision.pending)}"
        now = min(ends)
        assert now <= reservation.time, (
            f"job {reservation.job_id} was reserved {reservation} but has not started by then: "
            f"{decision.pending[reservation.job_id]}"
        )
        live = [r for r, e in zip(live, ends) if e > now]
        snap = replace(snap, pending=tuple(waiting.values()), running=tuple(live))
        decision = decide(snap, now)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=1, max_size=6),  # free GPUs per node (of 8)
    st.lists(
        st.tuples(
            st.integers(0, 5), st.integers(1, 8), st.sampled_from([-5.0, 0.0, 5.0, 10.0, 40.0])
        ),
        max_size=12,
    ),  # (node, GPUs, end) of running jobs
    st.integers(1, 8),
)
def test_the_count_only_reservation_is_the_general_one(
    free_counts: list[int], runs: list[tuple[int, int, float]], need: int
) -> None:
    """backfill.reserve_by_count, the fast path for plain requests, reserves the same node,
    GPUs and time as backfill.reserve (ties in end times included; an end already past,
    which reserve sees as now, it gets raw)."""
    from gpupool.policy.backfill import reserve, reserve_by_count
    from gpupool.policy.node_free import NodeFree
    from gpupool.policy.timeline import Release

    nodes = [node(f"n{i}", 8) for i in range(len(free_counts))]
    frees, releases, used = [], [], [0] * len(nodes)
    for i, n in enumerate(nodes):
        frees.append(NodeFree(n, set(range(free_counts[i])), None, None))
        used[i] = free_counts[i]
    for where, gpus, end in runs:
        i = where % len(nodes)
        held = tuple(range(used[i], min(8, used[i] + gpus)))
        if held:
            used[i] += len(held)
            releases.append(Release(end, nodes[i].name, held, Resources(len(held))))
    res = Resources(need)
    ends = [(r.end, r.node, len(r.gpus)) for r in releases]
    clamped = [r._replace(end=max(0.0, r.end)) for r in releases]  # as the pass builds them

    def on(names: set[str], by: float) -> list[Release]:
        return [r for r in clamped if r.node in names and r.end <= by]

    general = reserve(1, res, frees, clamped, now=0.0)
    fast = reserve_by_count(1, res, frees, ends, on, now=0.0)
    if general is None:
        assert fast is None
    else:
        assert fast is not None and fast.reservation == general.reservation
