"""`gpupool plan scaling`: ring all-reduce, DDP overlap, speedup, and the seed 004 verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.cli.main import main
from gpupool.plan.quantity import PlanError
from gpupool.plan.scaling import (
    bus_bandwidth_factor,
    compute_ms_from_flops,
    gpu_counts,
    plan_scaling,
    ring_allreduce_seconds,
)

RESNET50 = 25_557_032  # torchvision resnet50 parameters
SEED_004_LINEAR = 12_102_220  # seed 004's fully connected model


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", "scaling", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --- oracles -----------------------------------------------------------------------------------


def test_ring_allreduce_of_1gb_on_8_gpus_at_100gbs_is_17_5_ms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bus_bandwidth_factor(8) == 1.75
    assert ring_allreduce_seconds(1e9, 8, 100e9, latency_s=0) * 1e3 == pytest.approx(17.5)
    out = run_json(capsys, "--params", "250M", "--gpus", "8", "--bandwidth", "100GB/s")
    assert out["allreduce_ms"] == pytest.approx(17.5)
    assert out["bus_bandwidth_factor"] == 1.75
    assert out["inputs"]["latency_us"] == 0


def test_resnet50_gradients_on_8_gpus_at_10gbs_is_17_9_ms() -> None:
    plan = plan_scaling(RESNET50, 8, 10e9)
    assert plan.gradient_bytes / 1e6 == pytest.approx(102.2, abs=0.05)
    assert plan.points[-1].allreduce_ms == pytest.approx(17.9, abs=0.05)


def test_the_issue_invocation_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--params", "25557032", "--gpus", "8", "--bandwidth", "10GB/s")
    assert round(out["allreduce_ms"], 1) == 17.9
    assert out["gradient_mb"] == pytest.approx(102.2, abs=0.05)
    assert [p["gpus"] for p in out["points"]] == [1, 2, 4, 8]
    assert out["inputs"]["bandwidth_gbs"] == 10 and out["inputs"]["params"] == RESNET50
    assert out["choke"] == "unknown"  # no compute time given: no speedup to judge
    assert "--step-ms" in out["verdict"]


def test_seed_004_dataparallel_moves_about_10_gb_per_epoch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The slide's "46 MB" is torchsummary's MiB; in decimal MB the fp32 parameters are 48.4 MB,
    # which the slide rounds to ~50 MB: 50 MB x 2 transfers x 100 batches = 10 GB.
    assert SEED_004_LINEAR * 4 / 2**20 == pytest.approx(46.17, abs=0.01)
    plan = plan_scaling(SEED_004_LINEAR, 4, 10e9, batch=20, strong_scaling=True, samples=2000)
    two, four = plan.points[1], plan.points[2]
    assert two.steps_per_epoch == four.steps_per_epoch == 100
    assert four.dataparallel_gb_per_link_per_epoch == pytest.approx(9.68, abs=0.01)
    assert four.dataparallel_gb_per_link_per_epoch == pytest.approx(10, abs=0.5)
    assert two.dataparallel_gpu0_gb_per_epoch == pytest.approx(9.68, abs=0.01)
    # GPU 0 carries 2(N-1) x params; DDP spreads 2(N-1)/N x grads over every GPU.
    assert four.dataparallel_gpu0_gb_per_epoch == pytest.approx(3 * 9.68, abs=0.03)
    assert four.ddp_gb_per_gpu_per_epoch == pytest.approx(9.68 * 0.75, abs=0.01)
    out = run_json(
        capsys,
        "--params",
        "12.1M",
        "--gpus",
        "4",
        "--bandwidth",
        "10GB/s",
        "--samples",
        "2000",
        "--batch",
        "20",
        "--global-batch",
    )
    assert out["dataparallel_gb_per_link_per_epoch"] == pytest.approx(10, abs=0.5)
    assert out["points"][1]["dataparallel_gpu0_gb_per_epoch"] == pytest.approx(9.68, abs=0.01)


# --- the model ---------------------------------------------------------------------------------


def test_gpu_counts_are_powers_of_two_and_n_itself() -> None:
    assert gpu_counts(1) == (1,)
    assert gpu_counts(8) == (1, 2, 4, 8)
    assert gpu_counts(12) == (1, 2, 4, 8, 12)


def test_ddp_hides_all_but_the_last_bucket_behind_a_long_backward() -> None:
    plan = plan_scaling(RESNET50, 8, 10e9, step_ms=1000)
    last = plan.points[-1]
    assert plan.buckets == 5  # 4 x 25 MB + 2.2 MB
    assert last.exposed_comm_ms == pytest.approx(last.last_bucket_ms)
    assert last.last_bucket_ms == pytest.approx(1.75 * 2.228128e6 / 10e9 * 1e3)
    assert plan.choke == "gpu" and plan.verdict == "GPU choke: add GPUs"


def test_a_short_backward_leaves_the_whole_allreduce_exposed() -> None:
    plan = plan_scaling(RESNET50, 8, 10e9, step_ms=3)
    last = plan.points[-1]
    assert last.exposed_comm_ms == pytest.approx(last.allreduce_ms - 2.0)  # backward = 2 ms
    assert plan.choke == "network"
    assert plan.verdict == "network choke: adding GPUs will not help"


def test_the_verdict_names_the_threshold_that_decided() -> None:
    # Weak scaling at 10 GB/s with 8 ms of compute: 16 GPUs still nearly double 8 GPUs'
    # throughput, but each GPU waits on the network longer than it computes.
    slow_link = plan_scaling(RESNET50, 16, 10e9, step_ms=8)
    assert slow_link.choke == "network" and "faster link" in slow_link.reason
    assert slow_link.points[-1].efficiency is not None
    assert slow_link.points[-1].efficiency < 0.5
    # Seed 004's case: a fixed global batch split further; 4 GPUs are slower than 2.
    split = plan_scaling(SEED_004_LINEAR, 4, 15.75e9, step_ms=2, strong_scaling=True)
    assert split.choke == "network" and "2 -> 4 GPUs gives 0." in split.reason
    assert plan_scaling(RESNET50, 16, 10e9, step_ms=15).choke == "gpu"
    assert plan_scaling(RESNET50, 1, 10e9, step_ms=15).choke == "unknown"


def test_latency_is_paid_per_bucket_and_per_ring_step() -> None:
    plan = plan_scaling(1e6, 8, 1e12, latency_s=5e-6, bucket_bytes=25e6)  # 4 MB: one bucket
    assert plan.points[-1].allreduce_ms == pytest.approx(1.75 * 4e6 / 1e12 * 1e3 + 14 * 5e-3)
    split = plan_scaling(1e6, 8, 1e12, latency_s=5e-6, bucket_bytes=1e6)  # four buckets
    assert split.buckets == 4
    assert split.points[-1].allreduce_ms == pytest.approx(1.75 * 4e6 / 1e12 * 1e3 + 4 * 14 * 5e-3)


def test_strong_scaling_splits_compute_and_weak_keeps_it() -> None:
    weak = plan_scaling(RESNET50, 4, 1e15, step_ms=100, batch=32)
    strong = plan_scaling(RESNET50, 4, 1e15, step_ms=100, batch=128, strong_scaling=True)
    assert [p.compute_ms for p in weak.points] == [100, 100, 100]
    assert [p.compute_ms for p in strong.points] == [100, 50, 25]
    # With a near-infinite link both are ideal: 4 x 32 samples per 100 ms, 128 per 25 ms.
    assert weak.points[-1].speedup == pytest.approx(4, rel=1e-4)
    assert strong.points[-1].speedup == pytest.approx(4, rel=1e-4)
    assert weak.points[-1].samples_per_s == pytest.approx(1280, rel=1e-4)
    assert strong.points[-1].samples_per_s == pytest.approx(5120, rel=1e-4)


def test_compute_from_flops() -> None:
    # 4.1 GFLOPs forward x 3 for training, batch 256, 312 TFLOPS at 40%: 25.2 ms.
    assert compute_ms_from_flops(12.3e9, 256, 312, 0.4) == pytest.approx(25.23, abs=0.01)


def test_the_table_shows_steps_traffic_and_the_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "scaling", "--params", "25557032", "--gpus", "8", "--bandwidth", "10GB/s"]
    assert main([*argv, "--step-ms", "3", "--batch", "32", "--samples", "1.28M"]) == 0
    out = capsys.readouterr().out
    for text in ("17.9", "efficiency", "DP0", "assumptions:"):
        assert text in out
    assert "network choke: adding GPUs will not help" in out


def test_plot_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "scaling.png"
    argv = ["--params", "25557032", "--gpus", "8", "--bandwidth", "10GB/s", "--step-ms", "50"]
    run_json(capsys, *argv, "--plot", str(png))
    assert png.read_bytes().startswith(b"\x89PNG")


# --- the catalog -------------------------------------------------------------------------------


def test_interconnect_and_gpu_come_from_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    from gpupool.plan.catalog import load_catalog

    catalog = load_catalog()
    link, gpu = catalog.interconnect("nvlink3"), catalog.gpu("A100-80GB")
    out = run_json(
        capsys,
        "--params",
        "25557032",
        "--gpus",
        "8",
        "--interconnect",
        "nvlink3",
        "--gpu",
        "A100-80GB",
        "--flops-per-sample",
        "12.3e9",
        "--batch",
        "256",
    )
    assert out["inputs"]["bandwidth_gbs"] == link.bandwidth_gbs
    assert out["inputs"]["latency_us"] == pytest.approx(link.latency_us)
    step = compute_ms_from_flops(12.3e9, 256, gpu.peak_tflops("bf16"), 0.4)
    assert out["points"][0]["compute_ms"] == pytest.approx(step)
    default = run_json(capsys, "--params", "25557032", "--gpus", "2")
    assert "pcie4-x16" in default["assumptions"]["link"]


# --- bad flags ---------------------------------------------------------------------------------

BASE = ["--params", "25557032", "--gpus", "8", "--bandwidth", "10GB/s"]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--params", "lots", "--gpus", "8", "--bandwidth", "10GB/s"], "--params"),
        (["--params", "0", "--gpus", "8", "--bandwidth", "10GB/s"], "--params"),
        (["--params", "1e6", "--gpus", "0", "--bandwidth", "10GB/s"], "--gpus"),
        (["--params", "1e6", "--gpus", "2.5", "--bandwidth", "10GB/s"], "--gpus"),
        (["--params", "1e6", "--gpus", "8", "--bandwidth", "fast"], "--bandwidth"),
        (["--params", "1e6", "--gpus", "8", "--bandwidth", "0"], "--bandwidth"),
        ([*BASE, "--interconnect", "nvlink3"], "--bandwidth"),
        ([*BASE, "--latency-us", "-1"], "--latency-us"),
        ([*BASE, "--bytes-per-param", "0"], "--bytes-per-param"),
        ([*BASE, "--bucket-mb", "0"], "--bucket-mb"),
        ([*BASE, "--step-ms", "0"], "--step-ms"),
        ([*BASE, "--step-ms", "10", "--gpu", "A100-80GB"], "--step-ms"),
        ([*BASE, "--gpu", "A100-80GB"], "--flops-per-sample"),
        ([*BASE, "--flops-per-sample", "1e9", "--batch", "8"], "--gpu"),
        (
            [
                *BASE,
                "--gpu",
                "A100-80GB",
                "--flops-per-sample",
                "1e9",
                "--batch",
                "8",
                "--mfu",
                "2",
            ],
            "--mfu",
        ),
        (
            [
                *BASE,
                "--gpu",
                "A100-80GB",
                "--flops-per-sample",
                "1e9",
                "--batch",
                "8",
                "--mfu",
                "most",
            ],
            "--mfu",
        ),
        ([*BASE, "--batch", "0"], "--batch"),
        ([*BASE, "--samples", "2000"], "--samples"),
        ([*BASE, "--global-batch"], "--global-batch"),
        ([*BASE, "--plot", "scaling.pdf"], "--plot"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "scaling", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert flag in err and "\n" not in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--interconnect", "warp"], "--interconnect"),
        (["--gpu", "warp", "--flops-per-sample", "1e9", "--batch", "8"], "--gpu"),
    ],
)
def test_unknown_catalog_names_name_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "scaling", "--params", "1e6", "--gpus", "2", *argv]) == 2
    err = capsys.readouterr().err
    assert flag in err and "warp" in err


def test_the_pure_function_rejects_bad_numbers() -> None:
    with pytest.raises(PlanError, match="--samples needs --batch"):
        plan_scaling(1e6, 2, 1e9, samples=100)
    with pytest.raises(PlanError, match="--latency-us"):
        plan_scaling(1e6, 2, 1e9, latency_s=-1)


# --- properties --------------------------------------------------------------------------------

params_st = st.floats(1e5, 1e11)
bandwidth_st = st.floats(1e8, 1e12)
latency_st = st.floats(0, 50e-6)
step_st = st.floats(0.1, 10_000)


@settings(max_examples=80, deadline=None)
@given(
    params=params_st,
    bw=bandwidth_st,
    lat=latency_st,
    step=step_st,
    n=st.integers(1, 512),
    strong=st.booleans(),
)
def test_speedup_never_beats_n(
    params: float, bw: float, lat: float, step: float, n: int, strong: bool
) -> None:
    plan = plan_scaling(params, n, bw, latency_s=lat, step_ms=step, batch=64, strong_scaling=strong)
    for p in plan.points:
        assert p.speedup is not None and p.speedup <= p.gpus * (1 + 1e-9)
        assert p.exposed_comm_ms is not None and p.exposed_comm_ms <= p.allreduce_ms + 1e-9


@settings(max_examples=80, deadline=None)
@given(params=params_st, bw=bandwidth_st, lat=latency_st, n=st.integers(2, 1024))
def test_allreduce_grows_with_n_toward_twice_bytes_over_bandwidth(
    params: float, bw: float, lat: float, n: int
) -> None:
    times = [p.allreduce_ms for p in plan_scaling(params, n, bw).points]
    assert times == sorted(times)
    assert times[-1] < 2 * params * 4 / bw * 1e3
    assert ring_allreduce_seconds(params, n, bw, lat) <= ring_allreduce_seconds(
        params, n + 1, bw, lat
    )


@settings(max_examples=80, deadline=None)
@given(
    params=params_st,
    bw=bandwidth_st,
    more=st.floats(1, 100),
    lat=latency_st,
    step=step_st,
    n=st.integers(1, 256),
)
def test_more_bandwidth_never_slows_a_step(
    params: float, bw: float, more: float, lat: float, step: float, n: int
) -> None:
    slow = plan_scaling(params, n, bw, latency_s=lat, step_ms=step)
    fast = plan_scaling(params, n, bw * more, latency_s=lat, step_ms=step)
    for s, f in zip(slow.points, fast.points):
        assert f.step_ms is not None and s.step_ms is not None
        assert f.step_ms <= s.step_ms * (1 + 1e-12)
