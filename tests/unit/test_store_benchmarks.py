"""Benchmark results in the store (store/benchmarks.py, migration 0011), on SQLite and
PostgreSQL: saved whole with the machine, listed newest first, filtered by benchmark and by
GPU model as the scheduler matches models."""

from __future__ import annotations

from dataclasses import replace

from test_store import store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.benchmarks import SavedBenchmark
from gpupool.store import Store


def _saved(
    benchmark: str = "matmul", gpu_model: str | None = "NVIDIA H100 80GB HBM3"
) -> SavedBenchmark:
    return SavedBenchmark(
        id=0,
        user="alice",
        benchmark=benchmark,
        hostname="gpu-1",
        device="cuda" if gpu_model else "cpu",
        gpu_model=gpu_model,
        gpu_count=8 if gpu_model else 0,
        driver="550.54.15" if gpu_model else None,
        started_at=1000.5,
        saved_at=1010.25,
        passed=True,
        result={"format": 1, "benchmark": benchmark, "rows": [{"labels": {"n": 8192}}], "x": 1.5},
    )


def test_a_result_is_kept_whole_and_read_back_by_id(store: Store) -> None:
    first = store.save_benchmark(_saved())
    second = store.save_benchmark(_saved("membw"))
    assert second.id > first.id > 0
    assert store.benchmark_result(first.id) == replace(_saved(), id=first.id)
    assert store.benchmark_result(second.id + 100) is None


def test_listing_is_newest_first_filtered_and_limited(store: Store) -> None:
    ids = [
        store.save_benchmark(_saved("matmul", "NVIDIA H100 80GB HBM3")).id,
        store.save_benchmark(_saved("matmul", "NVIDIA A100-SXM4-80GB")).id,
        store.save_benchmark(_saved("membw", "NVIDIA H100 80GB HBM3")).id,
        store.save_benchmark(_saved("matmul", None)).id,
        store.save_benchmark(_saved("matmul", "NVIDIA H100 80GB HBM3")).id,
    ]
    assert [r.id for r in store.benchmark_results()] == ids[::-1]
    assert [r.id for r in store.benchmark_results("matmul")] == [ids[4], ids[3], ids[1], ids[0]]
    # "H100" names the H100 as the scheduler reads a GPU type; not the A100, not a CPU run
    assert [r.id for r in store.benchmark_results("matmul", "H100")] == [ids[4], ids[0]]
    assert [r.id for r in store.benchmark_results(None, "h100-sxm")] == [ids[4], ids[2], ids[0]]
    assert [r.id for r in store.benchmark_results("matmul", "H100", limit=1)] == [ids[4]]
    assert store.benchmark_results("allreduce") == []
