"""Queue order: priority class, then the multifactor score (fair share, service, age, size), then
submit time and id. Table-driven: jobs + usage + now -> the order `rank` must give.

The service factor V depends on GPUs x time limit; a case about another factor gives its jobs
the same GPUs x limit (V equal), or weight 0 for service where that cannot be (a CPU-only job
always has V = 1). The service factor itself: test_policy_ordering_service.py."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import node

from gpupool.core.hardware import Node
from gpupool.core.job import PRIORITY_CLASSES, Resources
from gpupool.policy import fairshare, ordering
from gpupool.policy.ordering import rank
from gpupool.policy.snapshot import (
    PendingJob,
    PolicyConfig,
    PriorityFactors,
    PriorityWeights,
    RunningJob,
    Snapshot,
    Usage,
)

DAY = 86400.0
NOW = 100 * DAY
LOW, NORMAL, HIGH, INTERACTIVE = (
    PRIORITY_CLASSES[k] for k in ("low", "normal", "high", "interactive")
)
AGE_MAX = PriorityWeights().age_max_s
HOUR = 3600.0
NO_SERVICE = PriorityWeights(service=0.0)  # the default weights, less the service factor


def job(
    job_id: int,
    gpus: int = 1,
    *,
    prio: int = NORMAL,
    waited: float = 3600.0,  # seconds in the queue at NOW
    project: str = "default",
    user: str = "",
    limit: float | None = None,  # time_limit_s; None: the policy's default
) -> PendingJob:
    return PendingJob(
        id=job_id,
        resources=Resources(gpus=gpus),
        priority=prio,
        submit_time=NOW - waited,
        user=user,
        project=project,
        time_limit_s=limit,
    )


def expected_service(gpu_s: float, weights: PriorityWeights = PriorityWeights()) -> float:
    """V for `gpu_s` GPU-seconds of expected service, from ordering.py's docstring formula."""
    scale = math.log(1.0 + weights.service_max_gpu_s / 60.0)
    return 1.0 - min(1.0, math.log(1.0 + gpu_s / 60.0) / scale)


def usage(**by_project_user: float) -> Usage:
    """usage(vision__ana=10.0): decayed GPU-seconds per `project__user`, summed per project."""
    by_user: dict[tuple[str, str], float] = {}
    by_project: dict[str, float] = {}
    for key, used in by_project_user.items():
        project, user = key.split("__")
        by_user[(project, user)] = used
        by_project[project] = by_project.get(project, 0.0) + used
    return Usage(by_project=by_project, by_user=by_user)


@dataclass(frozen=True)
class Case:
    id: str
    pending: tuple[PendingJob, ...]
    order: tuple[int, ...]  # job ids, best first
    usage: Usage = Usage()
    running: tuple[RunningJob, ...] = ()
    nodes: tuple[Node, ...] = (node("box", 8),)
    weights: PriorityWeights = PriorityWeights()


CASES = [
    # --- the class is a hard tier ---------------------------------------------------------------
    Case(
        "class beats everything: an old, big, unused low job after a fresh normal one",
        pending=(
            job(1, 8, prio=LOW, waited=10 * AGE_MAX, project="idle"),
            job(2, 0, prio=NORMAL, waited=0.0, project="busy", user="heavy"),
        ),
        usage=usage(busy__heavy=1e9),
        order=(2, 1),
    ),
    Case(
        "class beats service: a low CPU-only job (V = 1) after a normal 8-GPU one of V = 0",
        pending=(
            job(1, 0, prio=LOW, waited=AGE_MAX),
            job(2, 8, prio=NORMAL, waited=0.0, limit=PriorityWeights().service_max_gpu_s),
        ),
        order=(2, 1),
    ),
    Case(
        "interactive > high > normal > low",
        pending=(
            job(1, prio=LOW),
            job(2, prio=NORMAL),
            job(3, prio=HIGH),
            job(4, prio=INTERACTIVE),
        ),
        order=(4, 3, 2, 1),
    ),
    Case(
        "any int priority is its own tier",
        pending=(job(1, prio=201), job(2, prio=200, waited=AGE_MAX), job(3, prio=199)),
        order=(1, 2, 3),
    ),
    # --- fair share -----------------------------------------------------------------------------
    Case(
        "same class: the project that used less first, even if it submitted a day later",
        pending=(
            job(1, project="vision", user="ana", waited=2 * DAY),
            job(2, project="nlp", user="bo", waited=DAY),
        ),
        usage=usage(vision__ana=100.0, nlp__bo=10.0),
        order=(2, 1),
    ),
    Case(
        "a project that used nothing comes before one that used a little",
        pending=(job(1, project="old", user="x"), job(2, project="new", user="x")),
        usage=usage(old__x=1.0),
        order=(2, 1),
    ),
    Case(
        "same project: the user that used less first",
        pending=(
            job(1, project="vision", user="ana", waited=2 * DAY),
            job(2, project="vision", user="bo", waited=DAY),
        ),
        usage=usage(vision__ana=100.0, vision__bo=10.0),
        order=(2, 1),
    ),
    Case(
        "same project: a user without usage before one with some",
        pending=(job(1, project="vision", user="ana"), job(2, project="vision", user="cy")),
        usage=usage(vision__ana=100.0, vision__bo=10.0),
        order=(2, 1),
    ),
    Case(
        "project weighs most: a quiet project's user before a fresh user of a busy project",
        # F_quiet = 2**(-(10/110)*2) * (0.5 + 0.5 * 2**-1) = 0.66
        # F_busy  = 2**(-(100/110)*2) * (0.5 + 0.5 * 1) = 0.28
        pending=(job(1, project="busy", user="fresh"), job(2, project="quiet", user="ana")),
        usage=usage(busy__heavy=100.0, quiet__ana=10.0),
        order=(2, 1),
    ),
    # --- age ------------------------------------------------------------------------------------
    Case(
        "equal usage: older first",
        pending=(job(1, waited=DAY), job(2, waited=2 * DAY), job(3, waited=3 * DAY)),
        usage=usage(default__=50.0),
        order=(3, 2, 1),
    ),
    Case(
        "a day of age beats size (service equal: 8 GPUs x 1 h = 1 GPU x 8 h)",
        pending=(job(1, 8, waited=DAY, limit=HOUR), job(2, 1, waited=2 * DAY, limit=8 * HOUR)),
        order=(2, 1),
    ),
    Case(
        "age saturates at age_max_s: then size decides (service equal: 1 x 8 h = 8 x 1 h)",
        pending=(
            job(1, 1, waited=3 * AGE_MAX, limit=8 * HOUR),
            job(2, 8, waited=AGE_MAX + 1, limit=HOUR),
        ),
        order=(2, 1),
    ),
    Case(
        "a submit time in the future counts as age 0 (then submit time breaks the tie)",
        pending=(job(1, waited=-DAY), job(2, waited=-2 * DAY), job(3, waited=0.0)),
        order=(3, 1, 2),
    ),
    # --- size -----------------------------------------------------------------------------------
    Case(
        # Service weight 0: no limits give the CPU-only job (V = 1) the same V as the others.
        "size tie-breaks slightly: bigger first at equal age (no service weight)",
        pending=(job(1, 1), job(2, 8), job(3, 0), job(4, 4)),
        weights=NO_SERVICE,
        order=(2, 4, 1, 3),
    ),
    Case(
        "size is relative to the biggest node, clipped at 1 (service equal: 16 GPU-hours each)",
        pending=(job(1, 4, limit=4 * HOUR), job(2, 16, limit=HOUR), job(3, 8, limit=2 * HOUR)),
        nodes=(node("small", 4), node("big", 8)),
        order=(2, 3, 1),  # 16 and 8 both have size 1: submit time, then id
    ),
    # --- ties and weights -----------------------------------------------------------------------
    Case(
        "everything equal: submit time, then id",
        pending=(job(3, waited=10.0), job(1, waited=20.0), job(2, waited=20.0)),
        order=(1, 2, 3),
    ),
    Case(
        # Job 1 would lead on size and on service (8 GPU-minutes against 24 GPU-hours).
        "zero weights: plain priority then submit order",
        pending=(
            job(1, 8, waited=1.0, limit=60.0),
            job(2, 1, waited=2.0, project="new"),
            job(3, prio=HIGH),
        ),
        usage=usage(default__=1e6),
        weights=PriorityWeights(fairshare=0.0, age=0.0, size=0.0, service=0.0),
        order=(3, 2, 1),
    ),
]


def snapshot(case: Case) -> Snapshot:
    return Snapshot(
        nodes=case.nodes,
        pending=case.pending,
        running=case.running,
        usage=case.usage,
        config=PolicyConfig(weights=case.weights),
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_order(case: Case) -> None:
    ordered, factors = rank(snapshot(case), NOW)
    assert tuple(j.id for j in ordered) == case.order, {j.id: factors[j.id] for j in ordered}
    assert sorted(factors) == sorted(j.id for j in case.pending)


# --- the factors ----------------------------------------------------------------------------


def test_factors_of_one_job() -> None:
    w = PriorityWeights()
    snap = Snapshot(
        nodes=(node("box", 8),),
        pending=(job(1, 2, waited=AGE_MAX / 4, project="p", user="u"),),
        running=(RunningJob(9, "box", (0,), Resources(gpus=1), start_time=NOW, project="r"),),
        usage=usage(p__u=30.0, q__v=10.0),
    )
    _, factors = rank(snap, NOW)
    # Three projects share: p (pending, usage), q (usage only), r (running, no usage yet).
    # p used 30 of 40, its one user all of p's usage.
    f = 2 ** (-(30 / 40) * 3) * (0.5 + 0.5 * 2**-1)
    # No limit: the policy's default, 24 h; 2 GPUs x 24 h = 172,800 GPU-s = 2,880 GPU-minutes,
    # on a scale of 8 weeks = 80,640 GPU-minutes: V = 1 - ln(2,881) / ln(80,641) = 0.2949.
    v = 1 - math.log(2881) / math.log(80641)
    assert v == pytest.approx(0.2949, abs=1e-4)
    want = PriorityFactors(
        job_id=1,
        klass=NORMAL,
        fairshare=f,
        age=0.25,
        size=0.25,
        score=w.fairshare * f + w.age * 0.25 + w.size * 0.25 + w.service * v,
        service=v,
    )
    got = factors[1]
    assert type(got) is PriorityFactors
    assert (got.job_id, got.klass) == (1, NORMAL)
    assert (got.fairshare, got.age, got.size, got.service, got.score) == pytest.approx(
        (want.fairshare, want.age, want.size, want.service, want.score)
    )


def test_factors_are_real_priority_factors() -> None:
    """rank builds PriorityFactors without the dataclass __init__: they must be the same."""
    snap = Snapshot(nodes=(node("box", 8),), pending=(job(1, 2), job(2, 0, prio=LOW)))
    _, factors = rank(snap, NOW)
    assert factors[2].service == 1.0 and 0.0 < factors[1].service < 1.0  # not the default 0
    for got in factors.values():
        rebuilt = PriorityFactors(
            got.job_id, got.klass, got.fairshare, got.age, got.size, got.score, got.service
        )
        assert got == rebuilt
        assert hash(got) == hash(rebuilt)
        assert repr(got) == repr(rebuilt)
        assert vars(got) == vars(rebuilt)


def test_no_usage_and_equal_service_is_priority_then_size_then_submit_order() -> None:
    """Ages seconds apart hardly count next to size (100 points = ~17 hours of age). Every job
    asks for the same GPUs x limit (24 GPU-hours: the 1-GPU jobs by the default limit), so the
    service factor is equal (without that, the 2-GPU job 4 would go behind: the service tests)."""
    pend = (
        job(5, 1, waited=100.0),
        job(2, 1, waited=100.0),
        job(9, 1, prio=LOW, waited=200.0),
        job(7, 1, prio=HIGH, waited=50.0),
        job(1, 1, waited=80.0),
        job(4, 2, waited=10.0, limit=12 * HOUR),
    )
    ordered, factors = rank(Snapshot(nodes=(node("box", 8),), pending=pend), NOW)
    assert [j.id for j in ordered] == [7, 4, 2, 5, 1, 9]
    assert {f.fairshare for f in factors.values()} == {1.0}
    assert len({f.service for f in factors.values()}) == 1


def test_empty_queue() -> None:
    assert rank(Snapshot(nodes=()), NOW) == ([], {})


def test_no_nodes_means_size_zero() -> None:
    _, factors = rank(Snapshot(nodes=(), pending=(job(1, 4),)), NOW)
    assert factors[1].size == 0.0


def test_non_positive_age_max_saturates_at_once() -> None:
    weights = PriorityWeights(age_max_s=0.0)
    snap = Snapshot(
        nodes=(),
        pending=(job(1, waited=5.0), job(2, waited=-5.0)),
        config=PolicyConfig(weights=weights),
    )
    _, factors = rank(snap, NOW)
    assert (factors[1].age, factors[2].age) == (1.0, 0.0)


# --- properties: bounds and determinism -----------------------------------------------------

PROJECTS = ("vision", "nlp", "speech")
USERS = ("ana", "bo", "cy")

# Time limits from none (the default) through 0 to past service_max_gpu_s for one GPU.
limits = st.none() | st.floats(0.0, 2 * PriorityWeights().service_max_gpu_s)
pending_jobs = st.lists(
    st.builds(
        lambda i, gpus, prio, t, project, user, limit: PendingJob(
            id=i,
            resources=Resources(gpus=gpus),
            priority=prio,
            submit_time=t,
            project=project,
            user=user,
            time_limit_s=limit,
        ),
        st.integers(0, 10**6),
        st.integers(0, 16),
        st.sampled_from(sorted(PRIORITY_CLASSES.values())) | st.integers(0, 1000),
        st.floats(NOW - 3 * AGE_MAX, NOW + DAY),
        st.sampled_from(PROJECTS),
        st.sampled_from(USERS),
        limits,
    ),
    max_size=40,
    unique_by=lambda j: j.id,
)
usages = st.dictionaries(
    st.tuples(st.sampled_from(PROJECTS + ("gone",)), st.sampled_from(USERS)),
    st.floats(0.0, 1e10),
    max_size=8,
).map(lambda by_user: usage(**{f"{p}__{u}": v for (p, u), v in by_user.items()}))


@settings(max_examples=200, deadline=None)
@given(pending_jobs, usages, st.randoms(use_true_random=False))
def test_factors_in_zero_one_and_order_does_not_depend_on_input_order(
    pend: list[PendingJob], used: Usage, rnd: random.Random
) -> None:
    snap = Snapshot(nodes=(node("a", 4), node("b", 8)), pending=tuple(pend), usage=used)
    ordered, factors = rank(snap, NOW)

    assert sorted(j.id for j in ordered) == sorted(j.id for j in pend)
    w, default_limit = snap.config.weights, snap.config.default_time_limit_s
    for j in pend:
        f = factors[j.id]
        assert 0.0 <= f.fairshare <= 1.0
        assert 0.0 <= f.age <= 1.0
        assert 0.0 <= f.size <= 1.0
        assert 0.0 <= f.service <= 1.0
        limit = default_limit if j.time_limit_s is None else j.time_limit_s
        assert f.service == pytest.approx(expected_service(j.resources.gpus * limit, w))
        assert f.score == pytest.approx(
            w.fairshare * f.fairshare + w.size * f.size + w.age * f.age + w.service * f.service
        )
    keys = [(-factors[j.id].klass, -factors[j.id].score, j.submit_time, j.id) for j in ordered]
    assert keys == sorted(keys)

    shuffled = list(pend)
    rnd.shuffle(shuffled)
    by_user = list(used.by_user.items())
    rnd.shuffle(by_user)
    again = Snapshot(
        nodes=snap.nodes,
        pending=tuple(shuffled),
        usage=Usage(
            by_project=dict(reversed(list(used.by_project.items()))), by_user=dict(by_user)
        ),
    )
    ordered2, factors2 = rank(again, NOW)
    assert [j.id for j in ordered2] == [j.id for j in ordered]
    assert factors2 == factors


def big_snapshot(n: int, seed: int = 0) -> Snapshot:
    rnd = random.Random(seed)
    projects = [f"p{i}" for i in range(20)]
    pend = tuple(
        PendingJob(
            id=i,
            resources=Resources(gpus=rnd.choice((0, 1, 2, 4, 8))),
            priority=rnd.choice(tuple(PRIORITY_CLASSES.values())),
            submit_time=NOW - rnd.uniform(-DAY, 2 * AGE_MAX),
            user=f"u{rnd.randrange(50)}",
            project=rnd.choice(projects),
        )
        for i in range(n)
    )
    used: Mapping[str, float] = {
        f"{p}__u{u}": rnd.uniform(0, 1e6) for p in projects for u in range(50)
    }
    return Snapshot(nodes=(node("a", 8), node("b", 4)), pending=pend, usage=usage(**used))


def test_ten_thousand_jobs_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 jobs rank, and the fair-share factors are computed once, not per job (the
    benchmarks measure the speed; there is no timing assertion here)."""
    calls: list[int] = []

    def counted(used: Usage, active: Iterable[tuple[str, str]]) -> dict[tuple[str, str], float]:
        calls.append(1)
        return fairshare.fairshare_factors(used, active)

    monkeypatch.setattr(ordering, "fairshare_factors", counted)
    snap = big_snapshot(10_000)
    ordered, factors = ordering.rank(snap, NOW)
    assert len(ordered) == len(factors) == 10_000
    assert len(calls) == 1
    keys = [(-factors[j.id].klass, -factors[j.id].score, j.submit_time, j.id) for j in ordered]
    assert keys == sorted(keys)
