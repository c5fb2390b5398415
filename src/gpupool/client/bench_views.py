"""Saved benchmark results as the API gives them (`/v1/benchmarks`), read into core's
`SavedBenchmark` with each field checked (imported by the Client's benchmark calls only)."""

from __future__ import annotations

from gpupool.client.wire_json import Fields, JsonValue
from gpupool.core.benchmarks import SavedBenchmark


def read_saved_benchmark(answer: JsonValue, where: str = "") -> SavedBenchmark:
    f = Fields(answer, where)
    return SavedBenchmark(
        id=f.whole("id"),
        user=f.text("user"),
        benchmark=f.text("benchmark"),
        hostname=f.text("hostname"),
        device=f.text("device"),
        gpu_model=f.opt_text("gpu_model"),
        gpu_count=f.whole("gpu_count"),
        driver=f.opt_text("driver"),
        started_at=f.number("started_at"),
        saved_at=f.number("saved_at"),
        passed=f.flag("passed"),
        result=f.obj("result").data,
    )


def read_saved_benchmarks(answer: JsonValue) -> tuple[SavedBenchmark, ...]:
    return tuple(read_saved_benchmark(v, w) for w, v in Fields(answer).items("results"))
