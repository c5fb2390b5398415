"""ddp-sweep's verdicts from cells (no torch): plan scaling's, from the measured 1-GPU step,
and the same rule on the measured speedups (seed 004: network choke vs GPU choke)."""

from __future__ import annotations

import pytest

from gpupool.hwbench.ddp_cells import Cell, Mode, SweepSpec
from gpupool.hwbench.ddp_sweep import _throughput_rows, _verdicts
from gpupool.plan.scaling import plan_scaling

SPEC = SweepSpec(models=("mlp",), batch_sizes=(100,), length=12_000, device="cuda", steps=5,
                 warmup=1)  # fmt: skip
PARAMS = 12_102_220


def cell(mode: Mode, gpus: int, step_s: float) -> Cell:
    return Cell(mode, "mlp", PARAMS, gpus, 100, 100, step_s, 2.3, True)


def verdicts(cells: list[Cell]) -> dict[str, tuple[str, dict[str, float]]]:
    rows, notes = _verdicts(cells, SPEC, 4, 10e9, 0.0, "10 GB/s")
    assert notes and "mlp (12,102,220 params" in notes[0]
    return {str(r.labels["source"]): (str(r.labels["choke"]), dict(r.values)) for r in rows}


def test_a_flat_measured_speedup_is_a_network_choke_next_to_the_plans_verdict() -> None:
    # DDP: 2 GPUs barely help, 4 GPUs no faster than 2 (seed 004's MLP on PCIe)
    cells = [cell(Mode.DDP, 1, 0.010), cell(Mode.DDP, 2, 0.008), cell(Mode.DDP, 4, 0.008)]
    found = verdicts(cells)
    plan = plan_scaling(PARAMS, 4, 10e9, step_ms=10.0, batch=100, strong_scaling=True)
    assert found["plan"][0] == plan.choke
    assert found["plan"][1]["speedup"] == plan.points[-1].speedup
    assert found["ddp"][0] == "network"
    assert found["ddp"][1]["speedup"] == pytest.approx(
        0.010 / 0.008
    )  # samples/s ratio at the same batch
    assert found["ddp"][1]["gpus"] == 4
    assert "dp" not in found  # DataParallel not measured: no verdict invented


def test_a_near_linear_measured_speedup_is_a_gpu_choke() -> None:
    cells = [cell(Mode.DP, 1, 0.100), cell(Mode.DP, 2, 0.051), cell(Mode.DP, 4, 0.026)]
    found = verdicts(cells)
    assert found["dp"][0] == "gpu"
    assert found["dp"][1]["efficiency"] == pytest.approx(0.100 / 0.026 / 4)


def test_throughput_rows_carry_speedup_over_the_same_modes_one_gpu() -> None:
    cells = [cell(Mode.DDP, 1, 0.010), cell(Mode.DDP, 2, 0.008)]
    rows = {int(r.labels["gpus"]): r.values for r in _throughput_rows(cells)}
    assert rows[1]["samples_per_s"] == 100 / 0.010 and rows[1]["speedup"] == 1.0
    assert rows[2]["speedup"] == 0.010 / 0.008
    assert rows[2]["efficiency"] == pytest.approx(0.010 / 0.008 / 2)
