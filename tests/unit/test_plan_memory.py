"""`gpupool plan memory`: ZeRO model states, activations, which GPUs fit (plan/memory.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.cli.main import main
from gpupool.plan.memory import (
    ZERO_STAGES,
    activation_gb,
    memory_plan,
    min_gpus,
    stage_memory,
)

# The ZeRO paper's figure 1 example: 7.5B parameters, 64 GPUs, K = 12.
ZERO_PAPER_GB = {"none": 120.0, "zero1": 31.40625, "zero2": 16.640625, "zero3": 1.875}


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main(["plan", "memory", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def run_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["plan", "memory", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


# --- the oracle ---------------------------------------------------------------------------


def test_zero_paper_oracle_pure() -> None:
    plan = memory_plan(7.5e9, 64, 3)
    assert plan.gb_per_gpu_by_stage == pytest.approx(ZERO_PAPER_GB, rel=1e-12)
    assert plan.gb_per_gpu == pytest.approx(1.875)
    # The paper's rounded figures: 120 / 31.4 / 16.6 / 1.9 GB.
    rounded = [round(s.total_gb, 1) for s in plan.stages]
    assert rounded == [120.0, 31.4, 16.6, 1.9]


def test_issue_invocation_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--params", "7.5e9", "--gpus", "64", "--zero", "3")
    assert out["gb_per_gpu"] == pytest.approx(1.875)
    assert out["gb_per_gpu_by_stage"] == pytest.approx(ZERO_PAPER_GB)
    assert out["inputs"]["params"] == 7.5e9 and out["inputs"]["gpus"] == 64
    assert out["inputs"]["zero"] == 3
    assert [s["total_gb"] for s in out["stages"]] == pytest.approx(list(ZERO_PAPER_GB.values()))
    assert "assumptions" in out and out["fits"]


def test_table_output_has_stages_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "memory", "--params", "7.5B", "--gpus", "64", "--zero", "1"]) == 0
    out = capsys.readouterr().out
    for name in ("none", "zero1", "zero2", "zero3", "assumptions", "31.4"):
        assert name in out


# --- model states and activations ---------------------------------------------------------


def test_stage_breakdown() -> None:
    s = stage_memory(1e9, 4, 2)
    assert (s.params_gb, s.grads_gb, s.optimizer_gb) == pytest.approx((2.0, 0.5, 3.0))
    assert s.total_gb == pytest.approx(5.5)


def test_activations_korthikanti() -> None:
    # GPT-3 175B shape (s=2048, h=12288, a=96, L=96), b=1: sbh(34 + 5as/h) per layer.
    sbh = 2048 * 1 * 12288
    per_layer = sbh * (34 + 5 * 96 * 2048 / 12288)
    assert activation_gb(96, 12288, 2048, 1, 96) == pytest.approx(96 * per_layer / 1e9)
    assert activation_gb(96, 12288, 2048, 1, 96, "full") == pytest.approx(96 * 2 * sbh / 1e9)
    assert activation_gb(96, 12288, 2048, 1, 96, "selective") == pytest.approx(96 * 34 * sbh / 1e9)


def test_activations_add_to_every_stage(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--params", "1B", "--gpus", "8", "--layers", "24", "--hidden", "2048"]
    argv += ["--seq", "2048", "--micro-batch", "2", "--recompute", "full"]  # no --heads needed
    out = run_json(capsys, *argv)
    expected = activation_gb(24, 2048, 2048, 2, 16, "full")
    assert out["activations_gb"] == pytest.approx(expected)
    assert out["stages"][0]["total_gb"] == pytest.approx(16 + expected)
    out = run_json(capsys, "--params", "1B", "--activations-gb", "3.5")
    assert out["gb_per_gpu"] == pytest.approx(19.5)


def test_min_gpus() -> None:
    # 7.5B on 80 GB x 0.9 = 72 GB: none 120 > 72 never; z3 needs 120/72 -> 2.
    assert min_gpus(7.5e9, 0, 72.0) is None
    assert min_gpus(7.5e9, 3, 72.0) == 2
    assert min_gpus(7.5e9, 1, 72.0) == 3  # 30 + 90/N <= 72 -> N >= 2.14
    assert min_gpus(1e9, 0, 72.0) == 1
    assert min_gpus(7.5e9, 3, 60.0) == 2  # exact fit: 120 / 2 == 60
    assert min_gpus(1e9, 3, 10.0, activations_gb=10.0) is None


def test_fits_and_min_gpus_for_chosen_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--params", "7.5e9", "--gpus", "64", "--zero", "0", "--gpu", "a100 80gb")
    chosen = out["chosen_gpu"]
    assert chosen["memory_gb"] == 80 and chosen["usable_gb"] == pytest.approx(72)
    assert chosen["fits"] is False
    assert chosen["min_gpus"] == {"none": None, "zero1": 3, "zero2": 2, "zero3": 2}
    assert chosen["name"] not in out["gpus_that_fit"]


@settings(max_examples=50, deadline=None)
@given(
    params=st.floats(1e6, 1e12),
    gpus=st.integers(1, 4096),
    activations=st.floats(0, 100),
)
def test_more_gpus_never_raise_memory_and_stages_are_ordered(
    params: float, gpus: int, activations: float
) -> None:
    totals = [stage_memory(params, gpus, s, activations).total_gb for s in ZERO_STAGES]
    assert totals == sorted(totals, reverse=True)  # each stage shards more
    for s in ZERO_STAGES:
        more = stage_memory(params, gpus * 2, s, activations).total_gb
        assert more <= totals[s] * (1 + 1e-12)
    one = [stage_memory(params, 1, s, activations).total_gb for s in ZERO_STAGES]
    assert one == pytest.approx([16 * params / 1e9 + activations] * 4)


@settings(max_examples=50, deadline=None)
@given(params=st.floats(1e8, 1e12), usable=st.floats(8, 200), stage=st.sampled_from(ZERO_STAGES))
def test_min_gpus_is_the_fewest_that_fit(params: float, usable: float, stage: int) -> None:
    n = min_gpus(params, stage, usable)
    if n is None:
        assert stage_memory(params, 10**9, stage).total_gb > usable * (1 - 1e-9)
        return
    assert stage_memory(params, n, stage).total_gb <= usable * (1 + 1e-9)
    if n > 1:
        assert stage_memory(params, n - 1, stage).total_gb > usable


# --- errors and plot ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--params", "lots"], "--params"),
        (["--params", "0"], "--params"),
        (["--params", "1e9", "--gpus", "0"], "--gpus"),
        (["--params", "1e9", "--gpus", "2.5"], "--gpus"),
        (["--params", "1e9", "--zero", "4"], "--zero"),
        (["--params", "1e9", "--headroom", "1.5"], "--headroom"),
        (["--params", "1e9", "--headroom", "x"], "--headroom"),
        (["--params", "1e9", "--layers", "24"], "--hidden"),
        (
            [
                "--params",
                "1e9",
                "--layers",
                "2",
                "--hidden",
                "8",
                "--seq",
                "4",
                "--micro-batch",
                "1",
            ],
            "--heads",
        ),  # fmt: skip
        (
            [
                "--params",
                "1e9",
                "--layers",
                "2.5",
                "--hidden",
                "8",
                "--seq",
                "4",
                "--micro-batch",
                "1",
                "--recompute",
                "full",
            ],
            "--layers",
        ),  # fmt: skip
        (["--params", "1e9", "--layers", "24", "--activations-gb", "2"], "--activations-gb"),
        (["--params", "1e9", "--activations-gb", "-1"], "--activations-gb"),
        (["--params", "1e9", "--gpu", "no-such-gpu"], "no-such-gpu"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    assert flag in run_error(capsys, *argv)


def test_plot_writes_png(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    png = tmp_path / "memory.png"
    out = run_json(capsys, "--params", "7.5e9", "--gpus", "64", "--zero", "3", "--plot", str(png))
    assert out["gb_per_gpu"] == pytest.approx(1.875)
    assert png.read_bytes().startswith(b"\x89PNG")


def test_an_unknown_gpu_is_refused_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from gpupool.cli.main import main

    assert main(["plan", "memory", "--params", "7e9", "--gpu", "Z100"]) == 2
    assert "--gpu: unknown GPU 'Z100'" in capsys.readouterr().err
