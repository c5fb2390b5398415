"""Decayed GPU usage (Slurm's PriorityDecayHalfLife) and the fair-share factor it gives."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.policy.fairshare import (
    UsageInterval,
    decayed_gpu_seconds,
    decayed_usage,
    fairshare_factors,
)
from gpupool.policy.snapshot import Usage

DAY = 86400.0
WEEK = 7 * DAY


def simpson(gpus: float, start: float, stop: float, now: float, half_life: float) -> float:
    """The same integral, numerically (composite Simpson, 2,000 panels)."""
    n = 2000
    h = (stop - start) / n

    def f(t: float) -> float:
        return gpus * 2.0 ** (-(now - t) / half_life)

    total = f(start) + f(stop)
    total += 4 * sum(f(start + (2 * i - 1) * h) for i in range(1, n // 2 + 1))
    total += 2 * sum(f(start + 2 * i * h) for i in range(1, n // 2))
    return total * h / 3


# --- decayed_gpu_seconds ----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    gpus=st.just(0.0) | st.floats(0.01, 16.0),
    half_life=st.floats(60.0, 30 * DAY),
    length_in_half_lives=st.just(0.0) | st.floats(1e-9, 20.0),
    gap_in_half_lives=st.floats(0.0, 30.0),  # from the end of the interval to now
    start=st.floats(0.0, 2e9),
)
def test_closed_form_matches_numeric_integration(
    gpus: float,
    half_life: float,
    length_in_half_lives: float,
    gap_in_half_lives: float,
    start: float,
) -> None:
    end = start + length_in_half_lives * half_life
    now = end + gap_in_half_lives * half_life
    got = decayed_gpu_seconds(gpus, start, end, now, half_life)
    want = simpson(gpus, start, end, now, half_life) if end > start else 0.0
    # start and now are up to 2e9: their difference carries ~1e-7 s of rounding per half-life.
    assert got == pytest.approx(want, rel=1e-6, abs=1e-9 * gpus * half_life)
    assert 0.0 <= got <= gpus * (end - start) * (1 + 1e-9)


def test_one_gpu_for_one_half_life_ending_now() -> None:
    # integral_0^h 2**(-(h - t)/h) dt = h / ln 2 * (1 - 1/2)
    assert decayed_gpu_seconds(1.0, 0.0, WEEK, WEEK, WEEK) == pytest.approx(
        WEEK / (2 * math.log(2))
    )


def test_gpus_scale_linearly() -> None:
    one = decayed_gpu_seconds(1.0, 100.0, 5000.0, 9000.0, DAY)
    assert decayed_gpu_seconds(8.0, 100.0, 5000.0, 9000.0, DAY) == pytest.approx(8 * one)


@settings(max_examples=100, deadline=None)
@given(
    gpus=st.floats(0.5, 16.0),
    start=st.floats(0.0, 1e6),
    length=st.floats(1.0, 1e6),
    half_life=st.floats(3600.0, 30 * DAY),
)
def test_one_more_half_life_halves_the_usage(
    gpus: float, start: float, length: float, half_life: float
) -> None:
    end = start + length
    now = end + 10.0
    before = decayed_gpu_seconds(gpus, start, end, now, half_life)
    after = decayed_gpu_seconds(gpus, start, end, now + half_life, half_life)
    assert after == pytest.approx(before / 2, rel=1e-9)


def test_usage_after_now_does_not_count() -> None:
    """An interval that ends after `now` counts up to `now` (what ran so far)."""
    assert decayed_gpu_seconds(2.0, 0.0, 10 * DAY, DAY, WEEK) == decayed_gpu_seconds(
        2.0, 0.0, DAY, DAY, WEEK
    )


@pytest.mark.parametrize(
    ("start", "end", "now"),
    [
        (100.0, 100.0, 200.0),  # zero length
        (100.0, 50.0, 200.0),  # ends before it starts
        (300.0, 400.0, 200.0),  # entirely in the future
        (200.0, 400.0, 200.0),  # starts exactly now
    ],
    ids=["zero length", "reversed", "future", "starts now"],
)
def test_empty_intervals_count_nothing(start: float, end: float, now: float) -> None:
    assert decayed_gpu_seconds(4.0, start, end, now, DAY) == 0.0


def test_infinite_half_life_is_plain_gpu_seconds() -> None:
    assert decayed_gpu_seconds(4.0, 0.0, 100.0, 1e9, math.inf) == 400.0


def test_very_old_usage_decays_to_nothing_without_error() -> None:
    assert decayed_gpu_seconds(8.0, 0.0, DAY, 1e9, 60.0) == 0.0


def test_short_intervals_keep_their_precision() -> None:
    # A few ms on a 7-day half-life: barely decayed GPU-seconds, not lost to cancellation.
    start, end = 1e9, 1e9 + 1e-3
    assert decayed_gpu_seconds(1.0, start, end, end, WEEK) == pytest.approx(end - start, rel=1e-9)


@pytest.mark.parametrize("half_life", [0.0, -1.0, math.nan])
def test_half_life_must_be_positive(half_life: float) -> None:
    with pytest.raises(ValueError, match="half_life_s"):
        decayed_gpu_seconds(1.0, 0.0, 1.0, 1.0, half_life)


# --- decayed_usage ----------------------------------------------------------------------------


def test_decayed_usage_sums_per_project_and_per_user() -> None:
    now = 10 * DAY
    ivs = [
        UsageInterval("vision", "ana", 2, 0.0, DAY),
        UsageInterval("vision", "ana", 1, 2 * DAY, 3 * DAY),
        UsageInterval("vision", "bo", 4, DAY, 2 * DAY),
        UsageInterval("nlp", "ana", 8, 5 * DAY, 6 * DAY),
    ]
    usage = decayed_usage(ivs, now, WEEK)

    def one(iv: UsageInterval) -> float:
        assert iv.end is not None
        return decayed_gpu_seconds(iv.gpus, iv.start, iv.end, now, WEEK)

    assert usage.by_user == {
        ("nlp", "ana"): pytest.approx(one(ivs[3])),
        ("vision", "ana"): pytest.approx(one(ivs[0]) + one(ivs[1])),
        ("vision", "bo"): pytest.approx(one(ivs[2])),
    }
    assert usage.by_project == {
        "nlp": pytest.approx(one(ivs[3])),
        "vision": pytest.approx(one(ivs[0]) + one(ivs[1]) + one(ivs[2])),
    }


def test_running_intervals_count_up_to_now() -> None:
    now = 3 * DAY
    usage = decayed_usage([UsageInterval("p", "u", 2, DAY, None)], now, WEEK)
    assert usage.by_user[("p", "u")] == decayed_gpu_seconds(2, DAY, now, now, WEEK)
    later = decayed_usage([UsageInterval("p", "u", 2, DAY, None)], now + DAY, WEEK)
    assert later.by_project["p"] > usage.by_project["p"]  # it keeps accruing


def test_future_and_empty_intervals_leave_no_entry() -> None:
    usage = decayed_usage(
        [
            UsageInterval("later", "u", 8, 2 * DAY, None),
            UsageInterval("empty", "u", 8, DAY, DAY),
            UsageInterval("cpu", "u", 0, 0.0, DAY),
        ],
        DAY,
        WEEK,
    )
    assert usage == Usage()


def test_decayed_usage_of_nothing_is_empty() -> None:
    assert decayed_usage([], 0.0, WEEK) == Usage()


def test_one_more_half_life_halves_decayed_usage() -> None:
    ivs = [UsageInterval("p", "u", 4, 0.0, DAY), UsageInterval("q", "v", 1, DAY, 2 * DAY)]
    now = 3 * DAY
    before = decayed_usage(ivs, now, WEEK)
    after = decayed_usage(ivs, now + WEEK, WEEK)
    for project, used in before.by_project.items():
        assert after.by_project[project] == pytest.approx(used / 2)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.sampled_from(["x", "y"]),
            st.integers(0, 8),
            st.floats(0.0, 1e6),
            st.one_of(st.none(), st.floats(0.0, 1e6)),
        ),
        max_size=30,
    ),
    st.randoms(use_true_random=False),
)
def test_decayed_usage_does_not_depend_on_interval_order(
    rows: list[tuple[str, str, int, float, float | None]], rnd: random.Random
) -> None:
    ivs = [UsageInterval(*row) for row in rows]
    shuffled = list(ivs)
    rnd.shuffle(shuffled)
    assert decayed_usage(shuffled, 1e6, DAY) == decayed_usage(ivs, 1e6, DAY)


# --- fairshare_factors ------------------------------------------------------------------------


def test_no_usage_gives_everyone_a_factor_of_one() -> None:
    active = [("a", "x"), ("a", "y"), ("b", "x")]
    assert fairshare_factors(Usage(), active) == {key: 1.0 for key in active}


def test_factor_follows_the_documented_formula() -> None:
    usage = Usage(by_project={"a": 30.0, "b": 10.0}, by_user={("a", "a1"): 30.0, ("b", "b1"): 10.0})
    got = fairshare_factors(usage, [("a", "a2"), ("b", "b1")])
    # Two projects (share 1/2 each): F_a = 2**(-(30/40)/(1/2)), F_b = 2**(-(10/40)/(1/2)).
    # Project a has users a1 (usage, no jobs) and a2 (jobs, no usage): a2's F_user = 1.
    # Project b has one user with all its usage: F_user = 2**(-1/1) = 1/2.
    assert got[("a", "a2")] == pytest.approx(2**-1.5 * (0.5 + 0.5 * 1.0))
    assert got[("b", "b1")] == pytest.approx(2**-0.5 * (0.5 + 0.5 * 0.5))
    assert got[("a", "a1")] == pytest.approx(2**-1.5 * (0.5 + 0.5 * 2**-2))


def test_using_exactly_the_fair_share_gives_one_half_at_that_level() -> None:
    usage = Usage(by_project={"a": 5.0, "b": 5.0})
    got = fairshare_factors(usage, [("a", "u"), ("b", "u")])
    # No per-user usage: F_user = 1, so F = F_project = 2**(-(1/2)/(1/2)).
    assert got == {("a", "u"): pytest.approx(0.5), ("b", "u"): pytest.approx(0.5)}


def test_less_used_project_and_user_get_a_higher_factor() -> None:
    usage = Usage(
        by_project={"busy": 100.0, "quiet": 10.0},
        by_user={("busy", "x"): 80.0, ("busy", "y"): 20.0, ("quiet", "x"): 10.0},
    )
    got = fairshare_factors(usage, [("busy", "x"), ("busy", "y"), ("quiet", "x"), ("new", "z")])
    assert got[("new", "z")] == 1.0
    assert got[("quiet", "x")] > got[("busy", "y")] > got[("busy", "x")]


def test_project_missing_from_by_project_counts_its_users_usage() -> None:
    users_only = Usage(by_user={("a", "x"): 30.0, ("b", "y"): 10.0})
    both = Usage(by_project={"a": 30.0, "b": 10.0}, by_user=dict(users_only.by_user))
    active = [("a", "x"), ("b", "y")]
    assert fairshare_factors(users_only, active) == fairshare_factors(both, active)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from("abc"), st.sampled_from("xyz")), st.floats(0.0, 1e12), max_size=9
    ),
    st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("xyzw")), min_size=1, max_size=9),
)
def test_factors_are_in_zero_one(
    by_user: dict[tuple[str, str], float], active: list[tuple[str, str]]
) -> None:
    by_project: dict[str, float] = {}
    for (p, _u), v in by_user.items():
        by_project[p] = by_project.get(p, 0.0) + v
    got = fairshare_factors(Usage(by_project, by_user), active)
    assert set(active) <= set(got)
    assert all(0.0 <= f <= 1.0 for f in got.values())
