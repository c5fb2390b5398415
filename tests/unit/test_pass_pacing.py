"""engine/pacing.py: a pass after a quiet spell runs at once; under a stream of passes they
take at most their share of the time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpupool.engine.pacing import PASS_BURST_S, PASS_SHARE, PassBudget, PassDeferral


def test_a_lone_pass_after_a_quiet_spell_is_not_delayed() -> None:
    budget = PassBudget(share=0.2, burst_s=0.25)
    assert budget.spend(ended=100.0, took_s=0.05) == 100.0
    # One submission a second, each followed by a 50 ms pass: never paced.
    for second in range(1, 30):
        assert budget.spend(ended=100.0 + second, took_s=0.05) == 100.0 + second


def test_back_to_back_passes_are_spaced_to_their_share() -> None:
    budget = PassBudget(share=0.2, burst_s=0.25)
    now, passes, took = 0.0, 0, 0.05
    while now < 60.0:  # each pass starts as soon as the budget lets it
        ready = budget.spend(ended=now + took, took_s=took)
        passes += 1
        now = ready
    # 60 s at a 20% share of 50 ms passes: about 240 passes (the burst adds 5).
    assert 235 <= passes <= 250, passes


@given(st.lists(st.tuples(st.floats(0.0, 2.0), st.floats(0.001, 0.5)), min_size=1, max_size=200))
def test_passes_never_take_more_than_their_share_plus_the_burst(
    gaps_and_durations: list[tuple[float, float]],
) -> None:
    # Whatever the arrivals, passes that each start no sooner than the budget says take at
    # most share x elapsed + burst + the last pass.
    budget = PassBudget(share=0.2, burst_s=0.25)
    now, ready, spent = 0.0, 0.0, 0.0
    for gap, took in gaps_and_durations:
        start = max(now + gap, ready)
        ready = budget.spend(ended=start + took, took_s=took)
        spent += took
        now = start + took
    assert spent <= 0.2 * now + 0.25 + took + 1e-9


def test_a_budget_starts_full_of_its_own_burst() -> None:
    # It started with the module's default burst whatever burst it was given.
    deep = PassBudget(share=0.1, burst_s=0.5)
    assert deep.spend(ended=10.0, took_s=0.4) == 10.0


def test_with_the_daemons_pacing_a_pass_over_a_long_queue_a_second_never_waits() -> None:
    # The engine's defaults: one 25 ms pass (10,000 pending) a second always may start at
    # once, and passes back to back get about PASS_SHARE of the time.
    budget, ready = PassBudget(), 0.0
    for second in range(30):
        assert ready <= second
        ready = budget.spend(ended=second + 0.025, took_s=0.025)
    now, passes = 100.0, 0
    while now < 160.0:
        now = budget.spend(ended=now + 0.025, took_s=0.025)
        passes += 1
    expected = 60.0 * PASS_SHARE / 0.025
    assert expected * 0.95 <= passes <= expected * 1.05 + PASS_BURST_S / 0.025 + 1, passes


def test_a_pass_does_not_wait_while_fewer_than_the_threshold_are_in_flight() -> None:
    deferral = PassDeferral(at=8, max_s=0.5)
    assert not any(deferral.defer(now=t / 10, in_flight=7) for t in range(50))


def test_a_pass_waits_for_a_burst_at_most_max_s_and_the_next_may_wait_again() -> None:
    deferral = PassDeferral(at=8, max_s=0.5)
    assert deferral.defer(now=10.0, in_flight=8)
    assert deferral.defer(now=10.49, in_flight=100)
    assert not deferral.defer(now=10.5, in_flight=100)  # waited long enough: it runs
    assert deferral.defer(now=10.51, in_flight=100)  # the next due pass waits again
    assert not deferral.defer(now=10.6, in_flight=0)  # drained: at once
    assert deferral.defer(now=10.7, in_flight=9)  # a new burst: its own wait from here
    assert deferral.defer(now=11.19, in_flight=9)


@given(st.lists(st.tuples(st.floats(0.0, 0.3), st.integers(0, 20)), min_size=1, max_size=300))
def test_no_pass_waits_longer_than_max_s_whatever_the_load(
    steps: list[tuple[float, int]],
) -> None:
    deferral, now, waiting_since = PassDeferral(at=8, max_s=0.5), 0.0, None
    for gap, in_flight in steps:
        now += gap
        if deferral.defer(now, in_flight):
            waiting_since = now if waiting_since is None else waiting_since
            assert in_flight >= 8
            assert now - waiting_since < 0.5
        else:
            waiting_since = None
