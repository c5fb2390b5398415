"""`gpupool plan train`: 6 N D, time on GPUs x peak x MFU, Chinchilla sizes (plan/train.py)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.cli.main import main
from gpupool.plan.train import (
    budget_from_gpu_days,
    compute_optimal,
    compute_optimal_tokens,
    gpu_count_sweep,
    train_time,
    training_flops,
)

GPT3_FLOPS = 3.15e23
GPT3_SECONDS = GPT3_FLOPS / (1024 * 312e12 * 0.4)  # 2.4648e6 s
GPT3_ARGV = ["--params", "175e9", "--tokens", "300e9", "--gpus", "1024", "--gpu", "A100-80GB"]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main(["plan", "train", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def run_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["plan", "train", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


# --- oracles ------------------------------------------------------------------------------


def test_gpt3_oracle_pure() -> None:
    flops = training_flops(175e9, 300e9)
    assert flops == pytest.approx(3.15e23)
    time = train_time(flops, 1024, 312.0, 0.4)
    assert time.seconds == pytest.approx(2.4648e6, rel=1e-4)
    assert time.days == pytest.approx(28.53, abs=0.005)
    assert round(time.days, 1) == 28.5


def test_issue_invocation_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, *GPT3_ARGV, "--mfu", "0.4")
    assert out["mode"] == "time"
    assert out["flops"] == pytest.approx(GPT3_FLOPS)
    assert out["days"] == pytest.approx(28.53, abs=0.005)
    assert out["seconds"] == pytest.approx(GPT3_SECONDS)
    assert out["hardware"]["peak_tflops"] == 312
    assert out["gpu_hours"] == pytest.approx(1024 * GPT3_SECONDS / 3600)
    assert out["energy_kwh"] == pytest.approx(out["gpu_hours"] * out["hardware"]["tdp_w"] / 1000)
    assert out["inputs"]["params"] == "175e9" and out["assumptions"]["flops"]
    # GPT-3 saw 1.7 tokens per parameter; Chinchilla would want 20 (3.5T tokens).
    assert out["tokens_per_param"] == pytest.approx(300 / 175)
    assert out["compute_optimal_tokens"] == pytest.approx(3.5e12)


def test_chinchilla_oracle() -> None:
    c = 6 * 70e9 * 1.4e12
    assert c == pytest.approx(5.88e23)
    opt = compute_optimal(c)
    assert opt.params_opt == pytest.approx(70e9)
    assert opt.tokens_opt == pytest.approx(1.4e12)
    assert compute_optimal_tokens(70e9) == pytest.approx(1.4e12)


def test_budget_mode_flops(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--budget-flops", "5.88e23", "--peak-tflops", "312")
    assert out["mode"] == "budget"
    assert out["compute_optimal"]["params_opt"] == pytest.approx(70e9)
    assert out["compute_optimal"]["tokens_opt"] == pytest.approx(1.4e12)


def test_budget_mode_gpu_days(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--gpus", "1024", "--days", "30", "--peak-tflops", "312")
    budget = 1024 * 312e12 * 0.4 * 30 * 86400
    assert out["compute_optimal"]["budget_flops"] == pytest.approx(budget)
    assert out["compute_optimal"]["params_opt"] == pytest.approx(math.sqrt(budget / 120))
    assert out["days"] == pytest.approx(30)


def test_params_only_gives_compute_optimal_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--params", "70B", "--peak-tflops", "312", "--gpus", "8")
    assert out["mode"] == "optimal-tokens"
    assert out["tokens"] == pytest.approx(1.4e12)
    assert out["flops"] == pytest.approx(5.88e23)


def test_cost_from_rate_and_cloud_instance(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, *GPT3_ARGV, "--usd-per-gpu-hour", "2")
    assert out["cost_usd"] == pytest.approx(2 * out["gpu_hours"])
    out = run_json(capsys, "--params", "1B", "--tokens", "20B", "--gpus", "8",
                   "--cloud-instance", "aws-p4d.24xlarge")  # fmt: skip
    assert out["hardware"]["usd_per_gpu_hour"] > 0
    assert out["cost_usd"] == pytest.approx(out["hardware"]["usd_per_gpu_hour"] * out["gpu_hours"])


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "train", *GPT3_ARGV, "--mfu", "0.4"]) == 0
    out = capsys.readouterr().out
    assert "28.53" in out and "3.15e+23" in out and "assumptions" in out


# --- properties ---------------------------------------------------------------------------

positive_counts = st.floats(1e6, 1e13)


@settings(max_examples=50, deadline=None)
@given(flops=st.floats(1e15, 1e26), gpus=st.integers(1, 100_000), mfu=st.floats(0.01, 1))
def test_doubling_gpus_halves_time(flops: float, gpus: int, mfu: float) -> None:
    one, two = train_time(flops, gpus, 312, mfu), train_time(flops, 2 * gpus, 312, mfu)
    assert two.seconds == pytest.approx(one.seconds / 2)
    assert two.gpu_hours == pytest.approx(one.gpu_hours)  # ideal scaling: same GPU-hours


@settings(max_examples=50, deadline=None)
@given(params=positive_counts, tokens=positive_counts, k=st.floats(0.1, 100))
def test_flops_linear_in_tokens(params: float, tokens: float, k: float) -> None:
    assert training_flops(params, k * tokens) == pytest.approx(k * training_flops(params, tokens))


@settings(max_examples=50, deadline=None)
@given(budget=st.floats(1e15, 1e30), ratio=st.floats(1, 100))
def test_compute_optimal_spends_the_budget(budget: float, ratio: float) -> None:
    opt = compute_optimal(budget, ratio)
    assert training_flops(opt.params_opt, opt.tokens_opt) == pytest.approx(budget)
    assert opt.tokens_opt == pytest.approx(ratio * opt.params_opt)


@settings(max_examples=50, deadline=None)
@given(gpus=st.integers(1, 10_000), days=st.floats(0.1, 1000), mfu=st.floats(0.05, 1))
def test_gpu_day_budget_takes_those_days(gpus: int, days: float, mfu: float) -> None:
    budget = budget_from_gpu_days(gpus, days, 989, mfu)
    assert train_time(budget, gpus, 989, mfu).days == pytest.approx(days)


def test_gpu_count_sweep() -> None:
    assert gpu_count_sweep(1024) == (128, 256, 512, 1024, 2048, 4096, 8192)
    assert gpu_count_sweep(1) == (1, 2, 4, 8)
    assert 12 in gpu_count_sweep(12)


# --- errors and plot ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        ([], "--params"),
        (["--tokens", "1e9"], "--tokens"),
        (["--params", "1e9", "--tokens", "2e10", "--budget-flops", "1e20"], "--budget-flops"),
        (["--params", "1e9", "--gpus", "8", "--days", "3"], "--days"),
        (["--days", "3"], "--gpus"),
        (["--params", "x", "--peak-tflops", "100"], "--params"),
        (["--params", "1e9", "--peak-tflops", "-3"], "--peak-tflops"),
        (["--params", "1e9", "--peak-tflops", "100", "--mfu", "1.5"], "--mfu"),
        (["--params", "1e9", "--peak-tflops", "100", "--gpus", "0"], "--gpus"),
        (["--params", "1e9", "--peak-tflops", "100", "--gpus", "1.5"], "--gpus"),
        (["--params", "1e9", "--gpu", "A100-80GB", "--peak-tflops", "100"], "--peak-tflops"),
        (
            ["--params", "1e9", "--peak-tflops", "1", "--tokens-per-param", "0"],
            "--tokens-per-param",
        ),
        (
            ["--params", "1e9", "--peak-tflops", "1", "--usd-per-gpu-hour", "z"],
            "--usd-per-gpu-hour",
        ),
        (
            ["--params", "1e9", "--usd-per-gpu-hour", "2", "--cloud-instance", "x"],
            "--cloud-instance",
        ),
        (["--params", "1e9", "--peak-tflops", "1", "--tdp-w", "0"], "--tdp-w"),
        (["--params", "1e9", "--gpu", "no-such-gpu"], "no-such-gpu"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    assert flag in run_error(capsys, *argv)


def test_plot_writes_png(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    png = tmp_path / "train.png"
    out = run_json(capsys, *GPT3_ARGV, "--mfu", "0.4", "--plot", str(png))
    assert out["days"] == pytest.approx(28.53, abs=0.005)
    assert png.read_bytes().startswith(b"\x89PNG")


def test_an_unknown_gpu_is_refused_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from gpupool.cli.main import main

    assert main(["plan", "train", "--params", "7e9", "--tokens", "1e12", "--gpu", "Z100"]) == 2
    err = capsys.readouterr().err
    assert "--gpu: unknown GPU 'Z100'" in err and "A100-80GB" in err
