"""matmul, membw and pcie on the CPU at tiny sizes (CI's run): sane numbers, checks that
hold, progress that adds up, JSON that reads back; and compare's % of the catalog's peak."""

from __future__ import annotations

import argparse
import math

import pytest

from gpupool.hwbench.compare import catalog_gpu, figures
from gpupool.hwbench.modules import load
from gpupool.hwbench.result import BenchResult, Machine, Row
from gpupool.plan.catalog import load_catalog

pytest.importorskip("torch", reason="torch is not installed: make dist-deps")


class Ticks:
    def __init__(self) -> None:
        self.total = 0
        self.done = 0

    def start(self, total: int, what: str) -> None:
        self.total += total

    def advance(self, steps: int = 1) -> None:
        self.done += steps


def _run(name: str, *words: str) -> tuple[BenchResult, Ticks]:
    bench = load(name)
    assert bench is not None
    parser = argparse.ArgumentParser()
    bench.module.add_arguments(parser)
    ticks = Ticks()
    result = bench.module.run(parser.parse_args(["--device", "cpu", "--tiny", *words]), ticks)
    return result, ticks


@pytest.mark.parametrize(
    ("name", "measure", "labels"),
    [
        ("matmul", "tflops", {"dtype", "n"}),
        ("membw", "gbs", {"bytes"}),
        ("pcie", "gbs", {"direction", "memory", "bytes"}),
    ],
)
def test_each_runs_on_the_cpu_with_sane_checked_numbers(
    name: str, measure: str, labels: set[str]
) -> None:
    result, ticks = _run(name)
    assert result.benchmark == name and result.machine.device == "cpu"
    assert result.rows and all(set(r.labels) == labels for r in result.rows)
    for row in result.rows:
        assert math.isfinite(row.values[measure]) and row.values[measure] > 0, row
        assert 0 < row.values["seconds"] < 60, row
    assert result.checks and result.passed, result.checks
    assert ticks.total > 0 and ticks.done == ticks.total
    assert any("cpu" in n for n in result.notes)
    assert BenchResult.from_json(result.to_json()) == result


def test_matmul_on_the_cpu_runs_fp32_and_bf16_and_says_what_it_skipped() -> None:
    result, _ = _run("matmul", "--sizes", "32", "--dtypes", "bf16,tf32,fp32")
    assert [r.labels["dtype"] for r in result.rows] == ["bf16", "fp32"]
    assert set(result.checks) == {"bf16 matches float64", "fp32 matches float64"}
    assert any("skipped on the CPU: tf32" in n for n in result.notes)
    # FLOPs = 2 n^3 over the time measured
    row = result.rows[0]
    assert row.values["tflops"] == pytest.approx(2 * 32**3 / row.values["seconds"] / 1e12)


def test_membw_counts_read_and_write_bytes() -> None:
    result, _ = _run("membw", "--sizes-mib", "1")
    row = result.rows[0]
    assert row.labels["bytes"] == 1 << 20
    assert row.values["gbs"] == pytest.approx(2 * (1 << 20) / row.values["seconds"] / 1e9)


def _gpu_result(benchmark: str, model: str, rows: tuple[Row, ...]) -> BenchResult:
    machine = Machine("gpu-1", "cuda", model, 8, "550.54.15", "12.4", "2.4.0")
    return BenchResult(benchmark, machine, 1.0, {}, rows)


def test_compare_sets_each_throughput_against_the_catalogs_peak() -> None:
    catalog = load_catalog()
    h100 = catalog.gpu("H100-SXM")
    rows = (
        Row({"dtype": "bf16", "n": 8192}, {"seconds": 1.0, "tflops": 742.5}),
        Row({"dtype": "fp32", "n": 8192}, {"seconds": 1.0, "tflops": 50.0}),
        Row({"dtype": "tf32", "n": 8192}, {"seconds": 1.0, "tflops": 300.0}),
    )
    found = figures(_gpu_result("matmul", "NVIDIA H100 80GB HBM3", rows), catalog)
    assert [f.peak for f in found] == [h100.peak_tflops("bf16"), h100.peak_tflops("fp32"), None]
    assert found[0].percent == pytest.approx(100 * 742.5 / h100.peak_tflops("bf16"))
    assert found[2].why == "no catalog figure for tf32"
    membw = figures(
        _gpu_result("membw", "NVIDIA H100 80GB HBM3", (Row({"bytes": 1}, {"gbs": 3000.0}),)),
        catalog,
    )
    assert membw[0].peak == h100.memory_bandwidth_gbs
    pcie_row = Row({"direction": "h2d", "memory": "pinned", "bytes": 1}, {"gbs": 50.0})
    pcie = figures(_gpu_result("pcie", "NVIDIA H100 80GB HBM3", (pcie_row,)), catalog)
    assert pcie[0].peak == catalog.interconnect(f"pcie{h100.pcie_gen}-x16").bandwidth_gbs


def test_compare_gives_no_percent_for_a_cpu_run_or_an_unknown_gpu_and_says_why() -> None:
    catalog = load_catalog()
    cpu = BenchResult("membw", Machine("h", "cpu"), 1.0, {}, (Row({"bytes": 1}, {"gbs": 5.0}),))
    assert [(f.percent, f.why) for f in figures(cpu, catalog)] == [
        (None, "a CPU run: the catalog's peaks are GPUs'")
    ]
    odd = figures(
        _gpu_result("membw", "Mystery GPU 9000", (Row({"bytes": 1}, {"gbs": 5.0}),)), catalog
    )
    assert odd[0].percent is None and "not in the catalog" in odd[0].why


def test_the_most_specific_catalog_name_wins() -> None:
    catalog = load_catalog()
    assert catalog_gpu(catalog, "NVIDIA H100 PCIe") == catalog.gpu("H100-PCIe")
    assert catalog_gpu(catalog, "NVIDIA H100 80GB HBM3") == catalog.gpu("H100-SXM")
    assert catalog_gpu(catalog, "Tesla V100-SXM2-16GB") == catalog.gpu("V100-16GB")
    assert catalog_gpu(catalog, None) is None


def test_many_checks_are_counted_and_failures_named() -> None:
    from gpupool.cli.bench.render import checks_line

    few = {"a": True, "b": False}
    assert checks_line(few) == "a: ok, b: FAILED"
    many = {f"sum correct at {2**i} B": True for i in range(18)}
    assert checks_line(many) == "all 18 ok"
    many["sum correct at 8 B"] = False
    assert checks_line(many) == "17 of 18 ok; FAILED: sum correct at 8 B"


def test_every_registered_benchmark_is_installed_and_its_options_fit_bench_s() -> None:
    """One module's option clashing with bench's own (--gpus, --out, --json, --no-save)
    breaks every subcommand: the whole `gpupool bench` parser is built, with each module."""
    from gpupool.cli.main import _parser
    from gpupool.hwbench.modules import load
    from gpupool.hwbench.registry import BENCHMARKS

    top = _parser(("bench",))
    for name in BENCHMARKS:
        assert load(name) is not None, f"{name} is registered but its module is missing"
        extra = ["/tmp"] if name == "storage" else []
        args = top.parse_args(["bench", name, "--tiny", "--no-save", *extra])
        assert args.tiny and args.no_save
