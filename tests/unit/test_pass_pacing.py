"""engine/pacing.py: a pass after a quiet spell runs at once; under a stream of passes they
take at most their share of the time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpupool.engine.pacing import PassBudget


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
