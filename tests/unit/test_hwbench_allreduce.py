"""`bench allreduce`: nccl-tests' definitions as numbers, the options resolved, and real gloo
runs on the CPU with 2 and 4 local ranks (the sum checked, busbw/algbw = 2(n-1)/n)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math

import pytest

from gpupool.executor import rank_launcher
from gpupool.hwbench import allreduce, local_ranks
from gpupool.hwbench.result import BenchResult


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    allreduce.add_arguments(parser)
    return parser.parse_args(argv)


class Ticks:
    def __init__(self) -> None:
        self.started: list[tuple[int, str]] = []
        self.steps = 0

    def start(self, total: int, what: str) -> None:
        self.started.append((total, what))

    def advance(self, steps: int = 1) -> None:
        self.steps += steps


@pytest.mark.parametrize(
    ("ranks", "factor"), [(2, 1.0), (4, 1.5), (8, 1.75), (1, 0.0)], ids=lambda v: str(v)
)
def test_bus_factor_is_nccl_tests_all_reduce_correction(ranks: int, factor: float) -> None:
    assert allreduce.bus_factor(ranks) == factor


def test_a_row_is_time_algbw_and_busbw_in_gb_per_second() -> None:
    row = allreduce.measured_row(size=1_000_000_000, ranks=4, seconds=0.5)
    assert row.labels == {"bytes": 1_000_000_000, "elements": 250_000_000}
    assert row.values == {"time_us": 500_000.0, "algbw_gbs": 2.0, "busbw_gbs": 3.0}


def test_sizes_double_from_8_bytes_to_1_gib_as_all_reduce_perf() -> None:
    got = allreduce.sizes(8, 1 << 30, 2)
    assert got[0] == 8 and got[-1] == 1 << 30 and len(got) == 28
    assert all(b == 2 * a for a, b in zip(got, got[1:], strict=False))
    assert allreduce.sizes(8, 1 << 20, 4) == [8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288]


def test_sizes_are_whole_float32_elements_and_bad_ranges_are_refused() -> None:
    assert allreduce.sizes(10, 40, 2) == [8, 16, 32]
    assert allreduce.sizes(1, 4, 2) == [4]
    with pytest.raises(ValueError, match="--max-bytes 4 is below --min-bytes 8"):
        allreduce.sizes(8, 4, 2)


def test_the_plan_per_device_and_preset() -> None:
    tiny = allreduce.plan(parse("--tiny"), cuda_available=False)
    assert tiny.device == "cpu" and tiny.sizes[0] == 8 and tiny.sizes[-1] == 1 << 20
    assert (tiny.warmup, tiny.iters) == (allreduce.TINY_WARMUP, allreduce.TINY_ITERS)
    full = allreduce.plan(parse(), cuda_available=True)
    assert full.device == "cuda" and full.sizes[-1] == 1 << 30
    assert (full.warmup, full.iters) == (5, 20)  # nccl-tests' -w 5 -n 20
    assert full.params(8)["backend"] == "nccl"
    cpu = allreduce.plan(parse("--iters", "3", "--max-bytes", "4096"), cuda_available=True)
    assert cpu.device == "cuda" and cpu.iters == 3 and cpu.sizes[-1] == 4096
    assert allreduce.plan(parse(), cuda_available=False).sizes[-1] == allreduce.CPU_MAX_BYTES
    with pytest.raises(ValueError, match="torch sees no CUDA GPU"):
        allreduce.plan(parse("--device", "cuda"), cuda_available=False)
    with pytest.raises(ValueError, match="--iters at least 1"):
        allreduce.plan(parse("--iters", "0"), cuda_available=False)


def test_each_rank_parses_the_same_plan_from_the_job_command_line() -> None:
    args = parse("--tiny", "--min-bytes", "64", "--factor", "4", "--warmup", "0", "--iters", "2")
    again = parse(*allreduce.job_argv(args))
    assert allreduce.plan(again, False) == allreduce.plan(args, False)
    assert allreduce.plan(parse(*allreduce.job_argv(parse())), True).sizes[-1] == 1 << 30


def test_rank_zero_or_a_run_alone_reports_the_result() -> None:
    group = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    assert allreduce.in_rank_group(group) and not allreduce.reports_result(group)
    assert allreduce.reports_result({**group, "RANK": "0"})
    assert not allreduce.in_rank_group({}) and allreduce.reports_result({})
    assert allreduce.DISTRIBUTED is True
    assert allreduce.JOB_ENTRY == "gpupool.hwbench.allreduce_job"


def test_local_ranks_get_the_environment_the_pools_launcher_gives() -> None:
    ranks: rank_launcher.RanksFile = {
        "nproc_per_node": 4,
        "nnodes": 1,
        "node_rank": 0,
        "master_addr": "127.0.0.1",
        "master_port": 29500,
    }
    for r in range(4):
        assert local_ranks.rank_env({"A": "b"}, r, 4, 29500) == rank_launcher.rank_env(
            {"A": "b"}, ranks, r
        )


def test_progress_events_cross_the_pipe() -> None:
    ticks = Ticks()
    for line in (b'{"start": 3, "what": "sizes"}', b'{"advance": 2}', b"noise", b"[1]"):
        local_ranks.relay(line, ticks)
    assert ticks.started == [(3, "sizes")] and ticks.steps == 2


torch_needed = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed: make dist-deps (docs/distributed.md)",
)


@torch_needed
@pytest.mark.parametrize("n", [2, 4])
def test_a_gloo_all_reduce_on_the_cpu_is_correct_with_sane_bandwidth(n: int) -> None:
    ticks = Ticks()
    args = parse("--device", "cpu", "--tiny", "--ranks", str(n), "--factor", "4")
    if n == 4:  # four ranks on a busy 2-core machine: fewer sizes
        args = parse("--device", "cpu", "--tiny", "--ranks", "4", "--max-bytes", "65536")
    result = allreduce.run(args, ticks)
    expected = allreduce.plan(args, False).sizes
    assert [r.labels["bytes"] for r in result.rows] == list(expected)
    for row in result.rows:
        algbw, busbw = row.values["algbw_gbs"], row.values["busbw_gbs"]
        assert math.isfinite(busbw) and busbw > 0 and row.values["time_us"] > 0
        assert busbw / algbw == pytest.approx(2 * (n - 1) / n, rel=1e-12)
        assert algbw == pytest.approx(row.labels["bytes"] / (row.values["time_us"] / 1e6) / 1e9)
    assert set(result.checks) == {f"sum correct at {s} B" for s in expected}
    assert result.passed
    assert result.params["ranks"] == n and result.params["rank"] == 0
    assert result.params["backend"] == "gloo" and result.machine.device == "cpu"
    assert ticks.started == [(len(expected), "all-reduce sizes")]
    assert ticks.steps == len(expected)
    again = BenchResult.from_json(json.loads(result.dumps()))
    assert again == result


@torch_needed
def test_a_rank_that_fails_is_named_with_its_exit_code_and_output() -> None:
    with pytest.raises(local_ranks.RanksFailed) as failed:
        local_ranks.run_ranks(
            allreduce.JOB_ENTRY, ["--factor", "3", "--out", "/nonexistent"], 2, Ticks(), 120
        )
    assert failed.value.exit_code == 2 and failed.value.rank in (0, 1)
    assert "--factor: invalid choice" in str(failed.value)
