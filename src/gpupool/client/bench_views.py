"""Saved benchmark results as the API gives them (`/v1/benchmarks`), read into core's
`SavedBenchmark` with each field checked (imported by the Client's benchmark calls only)."""

from __future__ import annotations

from gpupool.client.wire_json import JsonValue, conform, json_of
from gpupool.core.benchmarks import SavedBenchmark
from gpupool.core.wire_shapes import BenchmarkListWire, SavedBenchmarkWire


def _saved(w: SavedBenchmarkWire) -> SavedBenchmark:
    return SavedBenchmark(
        id=w["id"],
        user=w["user"],
        benchmark=w["benchmark"],
        hostname=w["hostname"],
        device=w["device"],
        gpu_model=w["gpu_model"],
        gpu_count=w["gpu_count"],
        driver=w["driver"],
        started_at=w["started_at"],
        saved_at=w["saved_at"],
        passed=w["passed"],
        result=json_of(w["result"]),
    )


def read_saved_benchmark(answer: JsonValue) -> SavedBenchmark:
    return _saved(conform(SavedBenchmarkWire, answer))


def read_saved_benchmarks(answer: JsonValue) -> tuple[SavedBenchmark, ...]:
    return tuple(_saved(s) for s in conform(BenchmarkListWire, answer)["results"])
