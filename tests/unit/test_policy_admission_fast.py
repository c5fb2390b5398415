"""The fast paths of queue ranking and quota admission against straightforward versions.

`QuotaBook.verdict` answers most borrowers without `admit` (`_least_over`), `BorrowerQueue`
takes the borrowers in order by looking each project's next job up when needed, and `rank`
computes the scores in line and builds each job's factors only when they are read. Each must
decide exactly as the plain versions kept here (the code they replaced): the same verdicts,
the same borrowers drawn in the same order, the same left undrawn, the same queue order and
factors, and, through `decide`, the same `Decision`.
"""

from __future__ import annotations

import heapq
import importlib
import math
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.core.hardware import Gpu, Node
from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy import PendingJob, RunningJob, Snapshot, borrowers, decide
from gpupool.policy.borrowers import BorrowerQueue
from gpupool.policy.fairshare import fairshare_factors
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.ordering import rank
from gpupool.policy.quota import EPS, QuotaBook, Verdict
from gpupool.policy.snapshot import PolicyConfig, PriorityFactors, PriorityWeights, Usage

GiB = 1 << 30
NOW = 10_000.0
DAY = 86400.0
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = tuple(f"p{i}" for i in range(24)) + ("nowhere",)  # "nowhere": not in Snapshot.projects

# --- the plain versions ---------------------------------------------------------------------


def plain_borrowers(book: QuotaBook, deferred: list[PendingJob]) -> Iterator[PendingJob]:
    """Class by class, then the project with the least share first, with a queue per
    project built up front."""
    i = 0
    while i < len(deferred):
        klass = deferred[i].priority
        queues: dict[str, list[tuple[int, PendingJob]]] = {}
        while i < len(deferred) and deferred[i].priority == klass:
            queues.setdefault(deferred[i].project, []).append((i, deferred[i]))
            i += 1
        heap = [(book.share(name), q[0][0], name, 0) for name, q in queues.items()]
        heapq.heapify(heap)
        while heap:
            _, _, name, k = heapq.heappop(heap)
            q = queues[name]
            while k < len(q):
                yield q[k][1]
                k += 1
                if k < len(q):
                    key = (book.share(name), q[k][0], name, k)
                    if heap and key > heap[0]:
                        heapq.heappush(heap, key)
                        break


class PlainQueue:
    """`BorrowerQueue` as `plain_borrowers`: a queue per project built up front."""

    def __init__(self, book: QuotaBook, deferred: list[PendingJob]) -> None:
        self.book, self.deferred, self.drawn = book, deferred, set()

    def __iter__(self) -> Iterator[PendingJob]:
        for job in plain_borrowers(self.book, self.deferred):
            self.drawn.add(job.id)
            yield job

    def untaken(self) -> list[PendingJob]:
        return [j for j in self.deferred if j.id not in self.drawn]


Raw = tuple[int, float, float, float, float]


def plain_rank(snapshot: Snapshot, now: float) -> tuple[list[PendingJob], dict[int, Raw]]:
    """Every job's factors in a dict, sorted on (-class, -score, submit time, id, place)."""
    pending = snapshot.pending
    w = snapshot.config.weights
    active = {(j.project, j.user) for j in pending} | {
        (r.project, r.user) for r in snapshot.running
    }
    fairshare = fairshare_factors(snapshot.usage, active)
    biggest = NodeFacts.of(snapshot.nodes).most_gpus
    size_of = [g / biggest for g in range(biggest + 1)] if biggest > 0 else [0.0]
    most = len(size_of) - 1
    keyed = []
    factors: dict[int, Raw] = {}
    for index, job in enumerate(pending):
        f = fairshare[(job.project, job.user)]
        gpus = job.resources.gpus
        s = size_of[gpus] if 0 <= gpus <= most else (1.0 if gpus > 0 and biggest > 0 else 0.0)
        waited = now - job.submit_time
        if waited <= 0.0:
            a = 0.0
        elif waited >= w.age_max_s:
            a = 1.0
        else:
            a = waited / w.age_max_s
        limit = job.time_limit_s
        if limit is None:
            limit = snapshot.config.default_time_limit_s
        amount = job.resources.gpu_fraction or float(job.resources.gpus)
        expected = max(0.0, amount * limit)
        v = 0.0
        if w.service_max_gpu_s > 0:
            v = 1.0 - min(1.0, math.log1p(expected / 60.0) / math.log1p(w.service_max_gpu_s / 60.0))
        score = w.fairshare * f + w.size * s + w.age * a + w.service * v
        keyed.append((-job.priority, -score, job.submit_time, job.id, index))
        factors[job.id] = (job.priority, f, a, s, score, v)
    keyed.sort()
    return [pending[k[4]] for k in keyed], factors


# --- random pools ---------------------------------------------------------------------------


def make_nodes(rnd: random.Random) -> tuple[Node, ...]:
    return tuple(
        Node(f"n{i}", tuple(Gpu(g, "A100-80GB", 80 * GiB) for g in range(rnd.choice((4, 8)))))
        for i in range(rnd.randint(1, 3))
    )


def make_projects(rnd: random.Random, names: tuple[str, ...]) -> dict[str, Project]:
    """Quotas (some 0, some fractional), weights, and limits in about half the pools."""
    with_limits = rnd.random() < 0.5
    no_quotas = rnd.random() < 0.15
    projects = {}
    for name in names:
        q = 0.0 if no_quotas else rnd.choice([0.0, 0.0, 1.0, 2.0, 3.5, 8.0, 0.3, 1e-10])
        limit = rnd.choice([None, None, q, q + 1.0, q + 2.5]) if with_limits else None
        projects[name] = Project(name, quota=q, limit=limit, weight=rnd.choice([0.5, 1, 2, 3]))
    return projects


def make_resources(rnd: random.Random) -> Resources:
    r = rnd.random()
    if r < 0.08:
        return Resources(gpus=1, gpu_fraction=rnd.choice([0.25, 0.5]))
    if r < 0.12:
        return Resources(gpus=1, gpu_memory_bytes=rnd.choice([10, 40]) * GiB)
    return Resources(gpus=rnd.choice([0, 1, 1, 1, 2, 2, 3, 4, 8]))


def make_running(
    rnd: random.Random, nodes: tuple[Node, ...], names: tuple[str, ...]
) -> tuple[RunningJob, ...]:
    """Jobs on GPUs of their own, some holding part of one: what each project has in use."""
    running = []
    free = {n.name: list(range(len(n.gpus))) for n in nodes}
    for i in range(rnd.randint(0, 12)):
        n, res = rnd.choice(nodes), make_resources(rnd)
        count = 1 if res.fractional else min(max(1, res.gpus), len(free[n.name]))
        if count == 0:
            continue
        gpus, free[n.name] = tuple(free[n.name][:count]), free[n.name][count:]
        res = res if res.fractional else replace(res, gpus=count)
        start, project = NOW - rnd.uniform(0, DAY), rnd.choice(names)
        user = rnd.choice(("", "", "ana", "bo"))
        running.append(RunningJob(5000 + i, n.name, gpus, res, start, project=project, user=user))
    return tuple(running)


def make_pending(
    rnd: random.Random, names: tuple[str, ...], users: tuple[str, ...]
) -> tuple[PendingJob, ...]:
    classes = rnd.choice([(200,), (200,), (100, 200, 300), (200, 400)])
    return tuple(
        PendingJob(
            i,
            make_resources(rnd),
            priority=rnd.choice(classes),
            submit_time=NOW - rnd.choice([0.0, 5.0, 600.0, DAY, 30 * DAY, -60.0]),
            user=rnd.choice(users),
            project=rnd.choice(names),
            begin_time=rnd.choice([None] * 8 + [NOW + 100.0, NOW - 100.0]),
            preemptible=rnd.random() < 0.85,
        )
        for i in range(1, rnd.randint(1, 70))
    )


@st.composite
def pools(draw: st.DrawFn) -> Snapshot:
    """Up to 25 projects, so that a class can have more than `_SCANNED_PROJECTS`."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    names = tuple(rnd.sample(NAMES, rnd.choice([1, 2, 4, 6, 20, 25])))
    projects = make_projects(rnd, tuple(n for n in names if n != "nowhere"))
    nodes = make_nodes(rnd)
    users = rnd.choice([("",), ("",), ("ana", "bo", "cy")])
    return Snapshot(
        nodes,
        make_pending(rnd, names, users),
        make_running(rnd, nodes, names),
        projects=projects,
    )


# --- verdicts and the borrowers' order ------------------------------------------------------


def draw(
    snap: Snapshot, make: Callable[..., Iterable[PendingJob]], seed: int, stop_after: int
) -> tuple[object, ...]:
    """Draw borrowers as the pass does, with made-up outcomes (a start counted in use, GPUs
    moved between projects as a reclaim moves them), stopping after `stop_after` draws;
    record the order drawn, what was left undrawn, and the figures in use."""
    book = QuotaBook(snap)
    rnd = random.Random(seed)
    deferred = [j for j in snap.pending if book.admit(j) is Verdict.BORROW]
    names = sorted({j.project for j in snap.pending})
    queue = make(book, deferred)
    drawn = []
    for job in queue:
        if len(drawn) >= stop_after:
            break
        drawn.append(job.id)
        if rnd.random() < 0.6:
            book.add(job.project, book.ask(job.resources))
        if rnd.random() < 0.2:
            book.add(rnd.choice(names), -rnd.choice([1.0, 2.0]))
    left = [j.id for j in queue.untaken()]  # type: ignore[attr-defined]
    return drawn, left, book.in_use


@pytest.mark.parametrize("scanned", [borrowers._SCANNED_PROJECTS, 0], ids=["scan", "table"])
@SETTINGS
@given(pools(), st.integers(0, 2**32 - 1), st.integers(0, 40))
def test_the_borrower_queue_draws_as_the_plain_version(
    scanned: int, snap: Snapshot, seed: int, stop_after: int
) -> None:
    """With "table", each project's next job is found from the table whatever the number
    of projects (normally only past `_SCANNED_PROJECTS`): the same order as by the scan."""
    want = draw(snap, PlainQueue, seed, stop_after)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(borrowers, "_SCANNED_PROJECTS", scanned)
        assert draw(snap, BorrowerQueue, seed, stop_after) == want


@SETTINGS
@given(pools(), st.integers(0, 2**32 - 1))
def test_verdict_is_admit(snap: Snapshot, seed: int) -> None:
    """The fast path of `verdict` (`_least_over`, kept until a figure in use changes) gives
    `admit`'s verdict, as the figures move."""
    book = QuotaBook(snap)
    rnd = random.Random(seed)
    names = sorted({j.project for j in snap.pending})
    jobs = list(snap.pending)
    rnd.shuffle(jobs)
    for job in jobs:
        assert book.verdict(job) == book.admit(job), job
        if rnd.random() < 0.3:
            book.add(rnd.choice(names), rnd.choice([-2.0, -0.5, 1.0, 2.0, 3.0]))


# --- _least_over ----------------------------------------------------------------------------

quotas = st.floats(0.0, 1e6) | st.sampled_from([0.0, 1e-10, 0.1, 0.3, 2.0, 1e6])
in_use = st.floats(-10.0, 1e6) | st.sampled_from(
    [0.0, 1e-10, 0.3, 2.0**40, 2.0**53, 1e300, math.inf, -math.inf, math.nan]
)


@settings(max_examples=500, deadline=None)
@given(quotas, in_use, st.integers(1, 64))
def test_least_over_is_where_admit_stops_counting_a_claim(
    quota_gpus: float, use: float, span: int
) -> None:
    """Every whole-GPU count from `_least_over` up fails `admit`'s claim test, and every
    one below passes it (inf: `admit` decides, for figures too large to step through)."""
    snap = Snapshot((), projects={"p": Project("p", quota=quota_gpus)})
    book = QuotaBook(snap)
    book.in_use["p"] = use
    least = book._least_over("p")
    bound = quota_gpus + EPS
    if math.isinf(least):
        return  # admit decides: nothing to check
    assert least >= 1
    assert not use + float(least) <= bound
    assert least == 1 or use + float(least - 1) <= bound
    for g in range(max(1, int(least) - span), int(least) + span):
        assert (g >= least) == (not use + float(g) <= bound)


@pytest.mark.parametrize("quota_gpus", [0.0, 0.3, 1.0, 2.0, 3.5, 7.0, 1e6])
@pytest.mark.parametrize("g", [1, 2, 3, 5, 8])
def test_least_over_where_the_sum_meets_the_quota_exactly(quota_gpus: float, g: int) -> None:
    """In use just `g` below the quota (plus EPS): a job of `g` GPUs is still a claim."""
    book = QuotaBook(Snapshot((), projects={"p": Project("p", quota=quota_gpus)}))
    bound = quota_gpus + EPS
    for use in (bound - g, math.nextafter(bound - g, -math.inf), math.nextafter(bound - g, 0.0)):
        book.in_use["p"] = use
        least = book._least_over("p")
        for k in range(1, g + 3):
            assert (k >= least) == (not use + float(k) <= bound), (use, k, least)


# --- rank -----------------------------------------------------------------------------------

weights = st.builds(
    PriorityWeights,
    st.sampled_from([10_000.0, 0.0, 1.0, -3.0, 0.1]),
    st.sampled_from([1_000.0, 0.0, 7.0, -1.0]),
    st.sampled_from([100.0, 0.0, 2.5]),
    st.sampled_from([7 * DAY, DAY, 0.0, -5.0, 600.0]),
    st.sampled_from([10_000.0, 0.0, 3.0]),
    st.sampled_from([8 * 7 * DAY, 3600.0, 0.0]),
)


@SETTINGS
@given(pools(), weights, st.integers(0, 2**32 - 1))
def test_rank_is_the_plain_sort(snap: Snapshot, w: PriorityWeights, seed: int) -> None:
    rnd = random.Random(seed)
    pend = tuple(
        replace(j, resources=Resources(gpus=rnd.choice([-1, 0, 3, 9, 100])))
        if rnd.random() < 0.1
        else j
        for j in snap.pending
    )
    users = {(j.project, u) for j in pend for u in (j.user, "", "ana")}
    usage = Usage(
        by_project={p: rnd.uniform(1, 1e6) for p, _ in users if rnd.random() < 0.5},
        by_user={k: rnd.uniform(0, 1e6) for k in users if rnd.random() < 0.5},
    )
    nodes = snap.nodes if rnd.random() < 0.9 else ()
    run = snap.running
    if rnd.random() < 0.5:  # one user everywhere (as none named, in a replayed trace)
        user = rnd.choice(["", "ana"])
        pend = tuple(replace(j, user=user) for j in pend)
        run = tuple(replace(r, user=user) for r in run)
    snap = replace(snap, nodes=nodes, pending=pend, running=run, usage=usage)
    snap = replace(snap, config=PolicyConfig(weights=w))
    got, factors = rank(snap, NOW)
    want, raw = plain_rank(snap, NOW)
    assert [j.id for j in got] == [j.id for j in want]
    assert dict(factors) == {i: PriorityFactors(i, *r) for i, r in raw.items()}
    assert list(factors) == list(raw)


# --- decide ---------------------------------------------------------------------------------


@SETTINGS
@given(pools())
def test_decide_is_unchanged(snap: Snapshot) -> None:
    """The whole pass with the plain ranking, verdicts and borrowers' order decides the
    same."""
    got = decide(snap, NOW)
    with pytest.MonkeyPatch.context() as mp:

        def plain_rank_factors(s: Snapshot, now: float) -> tuple[list[PendingJob], object]:
            jobs, raw = plain_rank(s, now)
            return jobs, {i: PriorityFactors(i, *r) for i, r in raw.items()}

        mp.setattr(importlib.import_module("gpupool.policy.decide"), "rank", plain_rank_factors)
        mp.setattr(QuotaBook, "verdict", QuotaBook.admit)
        mp.setattr(importlib.import_module("gpupool.policy.scheduling_pass"), "BorrowerQueue",
                   PlainQueue)  # fmt: skip
        want = decide(snap, NOW)
    assert (got.starts, list(got.pending.items()), got.reservations, got.preemptions) == (
        want.starts,
        list(want.pending.items()),
        want.reservations,
        want.preemptions,
    )
    assert dict(got.estimated_start) == dict(want.estimated_start)
    assert dict(got.priorities) == dict(want.priorities)
