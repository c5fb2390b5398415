"""`gpupool top`'s bars (cli/top.py)."""

from __future__ import annotations

from gpupool.cli.top import BAR, bar


def test_a_bar_fills_in_proportion_and_says_when_the_share_is_unknown() -> None:
    assert bar(0.0) == "[" + "." * BAR + "]"
    assert bar(0.35) == "[####......]"
    assert bar(1.0) == "[" + "#" * BAR + "]"
    assert bar(1.7) == bar(1.0) and bar(-0.2) == bar(0.0)  # clipped, never wider
    assert bar(None) == "[" + "?" * BAR + "]"
