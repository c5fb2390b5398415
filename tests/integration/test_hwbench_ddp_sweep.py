"""`bench ddp-sweep --tiny` on the CPU: real DataParallel and real DDP over 1..2 gloo ranks
(spawned processes), sane numbers, replicas that agree, plan's verdict next to the measured
one, and the plot."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pytest

from gpupool.hwbench import ddp_sweep
from gpupool.hwbench.result import BenchResult
from gpupool.plan.scaling import plan_scaling

pytest.importorskip("torch", reason="torch is not installed: make dist-deps (docs/distributed.md)")
pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_vs_dp"


class Ticks:
    def __init__(self) -> None:
        self.total = 0
        self.done = 0

    def start(self, total: int, what: str) -> None:
        self.total += total

    def advance(self, steps: int = 1) -> None:
        self.done += steps


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[BenchResult, Ticks, Path]:
    plot = tmp_path_factory.mktemp("sweep") / "sweep.png"
    p = argparse.ArgumentParser()
    ddp_sweep.add_arguments(p)
    args = p.parse_args(
        ["--tiny", "--device", "cpu", "--batch-sizes", "4,8", "--steps", "2", "--plot", str(plot)]
    )
    ticks = Ticks()
    return ddp_sweep.run(args, ticks), ticks, plot


def test_every_cell_is_measured_with_sane_numbers(swept: tuple[BenchResult, Ticks, Path]) -> None:
    result, ticks, _ = swept
    assert result.passed, result.checks
    assert result.checks["DDP replicas agree"] is True
    cells = {
        (r.labels["model"], r.labels["mode"], r.labels["gpus"], r.labels["batch"]): r.values
        for r in result.rows
        if r.labels["table"] == "throughput"
    }
    expected = {(m, "dp", 1, b) for m in ("mlp", "cnn") for b in (4, 8)}  # CPU: DP at 1 only
    expected |= {(m, "ddp", n, b) for m in ("mlp", "cnn") for n in (1, 2) for b in (4, 8)}
    assert set(cells) == expected
    for values in cells.values():
        assert values["samples_per_s"] > 0 and values["step_ms"] > 0
        assert math.isfinite(values["loss"]) and 0 < values["loss"] < 10
    assert ticks.total == ticks.done == len(expected)
    assert result.params["gpu_counts"] == [1, 2]
    assert any("runs the wrapped module directly" in n for n in result.notes)
    assert BenchResult.from_json(result.to_json()) == result


def test_the_plans_verdict_sits_next_to_the_measured_one(
    swept: tuple[BenchResult, Ticks, Path],
) -> None:
    result, _, _ = swept
    verdicts = {
        (r.labels["model"], r.labels["batch"], r.labels["source"]): r
        for r in result.rows
        if r.labels["table"] == "verdict"
    }
    assert set(verdicts) == {(m, b, s) for m in ("mlp", "cnn") for b in (4, 8)
                             for s in ("plan", "ddp")}  # fmt: skip
    params = {"mlp": 1_302_220, "cnn": 196_200}  # seed 004's models at 1,200-sample inputs
    for (model, batch, source), row in verdicts.items():
        assert row.labels["choke"] in ("gpu", "network")
        if source != "plan":
            continue
        one = next(
            r.values["step_ms"]
            for r in result.rows
            if r.labels["table"] == "throughput"
            and (r.labels["model"], r.labels["mode"], r.labels["gpus"], r.labels["batch"])
            == (model, "ddp", 1, batch)
        )
        plan = plan_scaling(params[model], 2, 31.5e9, latency_s=5.7e-6, step_ms=one,
                            batch=float(batch), strong_scaling=True)  # fmt: skip
        assert row.labels["verdict"] == plan.verdict
        assert row.values["speedup"] == pytest.approx(plan.points[-1].speedup)


def test_the_plot_is_a_png(swept: tuple[BenchResult, Ticks, Path]) -> None:
    _, _, plot = swept
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_example_trains_the_benchmarks_own_models() -> None:
    from gpupool.hwbench import seed004

    sys.path.insert(0, str(EXAMPLE))
    try:
        import models  # examples/ddp_vs_dp/models.py
    finally:
        sys.path.remove(str(EXAMPLE))
    assert models.MODELS is seed004.MODELS and models.train_epoch is seed004.train_epoch
    assert seed004.parameter_count(seed004.mlp()) == 12_102_220  # seed 004's table
    assert seed004.parameter_count(seed004.cnn()) == 376_200
