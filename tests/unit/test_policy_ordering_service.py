"""The service factor V of the queue order (policy/ordering.py, issue 33): less expected
GPU-service (GPUs x time limit, the policy's default limit for a job without one) first, on a
log scale that reaches 0 at `PriorityWeights.service_max_gpu_s`; the class still comes first.

Expected values come from the docstring's formula (`expected_service`), not from the code."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import node
from test_policy_ordering import (
    AGE_MAX,
    HIGH,
    HOUR,
    LOW,
    NORMAL,
    NOW,
    expected_service,
    job,
    usage,
)

from gpupool.core.job import PRIORITY_CLASSES, Resources
from gpupool.policy.ordering import rank
from gpupool.policy.snapshot import (
    PendingJob,
    PolicyConfig,
    PriorityFactors,
    PriorityWeights,
    Snapshot,
    Usage,
)

MINUTE = 60.0
DEFAULT_LIMIT = PolicyConfig().default_time_limit_s
SERVICE_MAX = PriorityWeights().service_max_gpu_s


def ranked(
    *pending: PendingJob, config: PolicyConfig = PolicyConfig(), used: Usage = Usage()
) -> tuple[list[int], dict[int, PriorityFactors]]:
    """Job ids best first, and each job's factors, on one 8-GPU node."""
    snap = Snapshot(nodes=(node("box", 8),), pending=pending, usage=used, config=config)
    ordered, factors = rank(snap, NOW)
    return [j.id for j in ordered], dict(factors)


def service_of(gpus: int, limit: float | None, config: PolicyConfig = PolicyConfig()) -> float:
    _, factors = ranked(job(1, gpus, limit=limit), config=config)
    return factors[1].service


# --- short before long ----------------------------------------------------------------------


def test_a_short_job_goes_ahead_of_a_long_one_of_the_same_class_and_fairshare() -> None:
    """The long job waited two hours longer (age for it) and has a lower id; both are the
    same user's, so fair share, class and size are equal: only service puts the short first."""
    long = job(1, 1, waited=3 * HOUR, project="lab", user="ana", limit=12 * HOUR)
    short = job(2, 1, waited=HOUR, project="lab", user="ana", limit=5 * MINUTE)
    used = usage(lab__ana=1000.0)

    order, factors = ranked(long, short, used=used)
    assert order == [2, 1]
    assert factors[2].service == pytest.approx(expected_service(5 * MINUTE))
    assert factors[1].service == pytest.approx(expected_service(12 * HOUR))
    assert factors[2].fairshare == factors[1].fairshare
    assert factors[2].age < factors[1].age

    no_service = PolicyConfig(weights=PriorityWeights(service=0.0))
    assert ranked(long, short, config=no_service, used=used)[0] == [1, 2]


def test_the_log_scale_five_minutes_ahead_of_an_hour_about_as_an_hour_of_twelve() -> None:
    """The docstring's reading of the log scale: equal ratios of expected service are about
    equal steps of V."""
    five_min, hour, twelve = (service_of(1, t) for t in (5 * MINUTE, HOUR, 12 * HOUR))
    assert five_min > hour > twelve
    assert five_min - hour == pytest.approx(hour - twelve, rel=0.1)


# --- the limit it counts ----------------------------------------------------------------------


def test_a_job_without_a_limit_counts_the_policys_default_limit() -> None:
    two_hours = PolicyConfig(default_time_limit_s=2 * HOUR)
    unlimited = service_of(1, None, two_hours)
    assert unlimited == service_of(1, 2 * HOUR, two_hours)
    assert unlimited == pytest.approx(expected_service(2 * HOUR))

    # Without a limit it ranks between a 1-hour and a 4-hour job, submitted before both.
    pend = (job(1, 1, limit=4 * HOUR), job(2, 1, waited=2 * HOUR), job(3, 1, limit=HOUR))
    assert ranked(*pend, config=two_hours)[0] == [3, 2, 1]
    # With a 30-minute default it goes first; with a day's (the shipped one), last.
    assert ranked(*pend, config=PolicyConfig(default_time_limit_s=30 * MINUTE))[0] == [2, 3, 1]
    assert DEFAULT_LIMIT > 4 * HOUR
    assert ranked(*pend)[0] == [3, 1, 2]


# --- GPUs x time ------------------------------------------------------------------------------


def test_a_bigger_job_with_the_same_limit_ranks_behind() -> None:
    """The 2-GPU job is older and bigger (age and size for it): twice the GPU-service puts it
    behind the 1-GPU job all the same."""
    big = job(1, 2, waited=2 * HOUR, limit=HOUR)
    small = job(2, 1, waited=HOUR, limit=HOUR)
    order, factors = ranked(big, small)
    assert order == [2, 1]
    assert factors[1].size > factors[2].size and factors[1].age > factors[2].age
    assert factors[1].service == pytest.approx(expected_service(2 * HOUR))
    assert factors[2].service == pytest.approx(expected_service(HOUR))


def test_service_is_gpus_times_time() -> None:
    """2 GPUs for 1 hour count as 1 GPU for 2 hours; a CPU-only job expects no GPU-service."""
    assert service_of(2, HOUR) == service_of(1, 2 * HOUR) == service_of(4, 30 * MINUTE)
    assert service_of(0, 2 * SERVICE_MAX) == 1.0


def test_a_half_gpu_job_counts_half_a_gpu() -> None:
    """GPUs as every share counts them (orders.gpu_amount): a fraction counts its fraction."""
    half = PendingJob(1, Resources(gpus=1, gpu_fraction=0.5), NORMAL, NOW, time_limit_s=2 * HOUR)
    _, factors = ranked(half)
    assert factors[1].service == pytest.approx(expected_service(HOUR))


# --- bounds -----------------------------------------------------------------------------------


def test_service_is_1_for_no_service_and_0_at_and_after_the_scale() -> None:
    assert service_of(1, 0.0) == 1.0
    assert service_of(1, SERVICE_MAX) == 0.0
    assert service_of(8, SERVICE_MAX) == 0.0
    assert service_of(1, 10 * SERVICE_MAX) == 0.0
    assert 0.0 < service_of(1, 0.99 * SERVICE_MAX) < 0.01


def test_a_scale_of_zero_puts_every_job_at_0() -> None:
    """service_max_gpu_s <= 0: every job's expected service is at or after it."""
    config = PolicyConfig(weights=PriorityWeights(service_max_gpu_s=0.0))
    assert [service_of(g, t, config) for g, t in ((0, None), (1, 1.0), (8, None))] == [0.0] * 3


def test_beyond_the_scale_service_no_longer_orders() -> None:
    """Two jobs both past service_max_gpu_s have V = 0: the other factors decide (here age),
    where a longer scale puts the shorter job first."""
    long_earlier = job(1, 1, waited=2 * HOUR, limit=10 * HOUR)
    short_later = job(2, 1, waited=HOUR, limit=2 * HOUR)
    config = PolicyConfig(weights=PriorityWeights(service_max_gpu_s=HOUR))
    order, factors = ranked(long_earlier, short_later, config=config)
    assert (factors[1].service, factors[2].service) == (0.0, 0.0)
    assert order == [1, 2]
    assert ranked(long_earlier, short_later)[0] == [2, 1]


gpus = st.integers(0, 16)
time_limits = st.none() | st.floats(0.0, 4 * SERVICE_MAX)
scales = st.floats(1.0, 4 * SERVICE_MAX)


@settings(max_examples=200, deadline=None)
@given(gpus, time_limits, gpus, time_limits, scales)
def test_service_in_zero_one_falls_with_gpu_service_and_is_0_from_the_scale(
    gpus_a: int, limit_a: float | None, gpus_b: int, limit_b: float | None, scale: float
) -> None:
    config = PolicyConfig(weights=PriorityWeights(service_max_gpu_s=scale))
    _, factors = ranked(job(1, gpus_a, limit=limit_a), job(2, gpus_b, limit=limit_b), config=config)
    expected = {
        1: gpus_a * (DEFAULT_LIMIT if limit_a is None else limit_a),
        2: gpus_b * (DEFAULT_LIMIT if limit_b is None else limit_b),
    }
    for job_id, gpu_s in expected.items():
        v = factors[job_id].service
        assert 0.0 <= v <= 1.0
        assert v == pytest.approx(expected_service(gpu_s, config.weights))
        if gpu_s >= scale:
            assert v == 0.0
        if gpu_s == 0.0:
            assert v == 1.0
    if expected[1] <= expected[2]:
        assert factors[1].service >= factors[2].service
    else:
        assert factors[1].service <= factors[2].service


# --- the class first --------------------------------------------------------------------------

classes = st.sampled_from(sorted(PRIORITY_CLASSES.values())) | st.integers(0, 1000)


@settings(max_examples=200, deadline=None)
@given(
    st.tuples(classes, gpus, time_limits, st.floats(-1.0, 2.0)),
    st.tuples(classes, gpus, time_limits, st.floats(-1.0, 2.0)),
    st.floats(0.0, 1e9),
)
def test_the_class_comes_first_whatever_the_service(
    a: tuple[int, int, float | None, float],
    b: tuple[int, int, float | None, float],
    used_by_a: float,
) -> None:
    """Of two jobs of different classes the higher one leads, whatever their GPUs, limits,
    ages (in age_max_s) and fair share (a's project used `used_by_a`, b's nothing)."""
    (klass_a, gpus_a, limit_a, age_a), (klass_b, gpus_b, limit_b, age_b) = a, b
    job_a = job(1, gpus_a, prio=klass_a, waited=age_a * AGE_MAX, project="a", limit=limit_a)
    job_b = job(2, gpus_b, prio=klass_b, waited=age_b * AGE_MAX, project="b", limit=limit_b)
    order, _ = ranked(job_a, job_b, used=usage(a__=used_by_a))
    if klass_a > klass_b:
        assert order == [1, 2]
    elif klass_b > klass_a:
        assert order == [2, 1]


def test_the_class_comes_first_even_against_the_most_service() -> None:
    """A low CPU-only job (V = 1) that waited past age_max_s still goes after a high job of
    8 GPUs for 8 weeks (V = 0) submitted just now, and after a normal one between."""
    pend = (
        job(1, 0, prio=LOW, waited=2 * AGE_MAX, limit=0.0),
        job(2, 8, prio=HIGH, waited=0.0, limit=SERVICE_MAX),
        job(3, 8, prio=NORMAL, waited=0.0, limit=SERVICE_MAX),
    )
    order, factors = ranked(*pend)
    assert order == [2, 3, 1]
    assert (factors[1].service, factors[2].service, factors[3].service) == (1.0, 0.0, 0.0)
    # Without the class (all normal) the low job's service and age would put it first.
    assert ranked(*(replace(j, priority=NORMAL) for j in pend))[0][0] == 1
